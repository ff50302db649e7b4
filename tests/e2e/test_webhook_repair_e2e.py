"""A gang stamped by a webhook that was killed before making its PodGroup gets it from the next
webhook's repair, on a real kube-apiserver, and binds.

The pods are created as the webhook would have left them (group label and size, pointed at
PodGroup ``r``) with no PodGroup, which is what a killed webhook's lost queue leaves. The
repair ``fluence webhook`` starts beside its server finds them and makes the PodGroup; the
scheduler, waiting on the missing PodGroup, then binds the gang. Skipped without
KUBEBUILDER_ASSETS.
"""

from __future__ import annotations

import time

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import load_settings
from fluence_core.webhook import BackgroundWriter, build_service
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import scheduler_beside, wait_for
from tests.e2e.test_webhook_gang_e2e import fence
from fluence_core.webhook.controller.repair import repair_for

pytestmark = pytest.mark.e2e


def test_a_gang_whose_podgroup_was_lost_gets_it_from_the_repair_and_binds(
        kube: KubeCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    settings = load_settings(webhook_repair_interval=1)
    node = f"{ns}-n0"  # tainted: the pending pods earlier tests leave cannot take its room
    kube.create("nodes", make_node_dict(
        node, 4, labels={"e2e-ns": ns}, capacity=True,
        taints=[{"key": "e2e-ns", "value": ns, "effect": "NoSchedule"}]))
    members = [f"r-{i}" for i in range(3)]
    for name in members:  # as the killed webhook stamped them
        kube.create("pods", make_pod_dict(
            name, "1", namespace=ns, group="r", labels={names.GROUP_LABEL: "r"},
            annotations={names.GROUP_SIZE_ANNOTATION: "3"}, nodeSelector={"e2e-ns": ns},
            tolerations=fence(ns)), ns)
    writer = BackgroundWriter()
    repair = None
    try:
        with scheduler_beside(kube, settings):
            time.sleep(1.5)  # the scheduler sees the gang and waits for its PodGroup
            assert kube.get("podgroups", "r", ns) is None
            assert not any(kube.get("pods", m, ns)["spec"].get("nodeName") for m in members)
            service = build_service(settings, get_plugin_manager(settings), kube, writer=writer)
            repair = repair_for(service)
            assert repair is not None
            repair.start()
            group = wait_for(lambda: kube.get("podgroups", "r", ns),
                             "the PodGroup, made by the repair")
            assert group["spec"]["schedulingPolicy"]["gang"] == {"minCount": 3}
            assert group["metadata"]["labels"][names.MANAGED_BY_LABEL] == names.SCHEDULER_NAME
            placed = wait_for(lambda: all(kube.get("pods", m, ns)["spec"].get("nodeName")
                                      for m in members), "the whole gang bound")
            assert placed
            assert repair.repaired == 1
            time.sleep(1.5)  # another pass or two: nothing left to make
            assert repair.repaired == 1
    finally:
        if repair is not None:
            repair.stop()
        writer.close()
        for name in members:
            kube.delete("pods", name, ns, grace_period_seconds=0)
        kube.delete("podgroups", "r", ns)
        kube.delete("nodes", node)
