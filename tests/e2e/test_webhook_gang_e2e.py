"""A gang created through the webhook on a real kube-apiserver gets its PodGroup and binds.

The webhook answers before the PodGroup exists (its background writer makes it,
issue 20); the scheduler, running as ``fluence up`` runs it, leaves the gang
waiting until the PodGroup's watch event arrives, then binds all of it. A
grouped Job gets its PodGroup when the webhook admits the Job; the pods the job
controller makes point at it and bind. Skipped without KUBEBUILDER_ASSETS.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import ApiServer, scheduler_beside, wait_for, webhook_beside

pytestmark = pytest.mark.e2e


def fenced_nodes(kube: KubeCluster, ns: str) -> list[str]:
    """Two 4-core nodes for this test's pods only: tainted, so the pending Fluence pods that
    earlier tests leave on the shared API server cannot take the room the gang needs (the
    scheduler started here places every pending Fluence pod it sees)."""
    nodes = [f"{ns}-n{i}" for i in range(2)]
    for node in nodes:
        kube.create("nodes", make_node_dict(
            node, 4, labels={"e2e-ns": ns}, capacity=True,
            taints=[{"key": "e2e-ns", "value": ns, "effect": "NoSchedule"}]))
    return nodes


def fence(ns: str) -> list[dict[str, str]]:
    """The toleration of :func:`fenced_nodes`' taint."""
    return [{"key": "e2e-ns", "operator": "Equal", "value": ns, "effect": "NoSchedule"}]


def test_a_gang_created_through_the_webhook_gets_its_podgroup_and_binds(
        kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    ns = kube_namespace
    settings = load_settings(webhook_config=f"fluence-gang-{ns}")
    nodes = fenced_nodes(kube, ns)
    members = [f"g-{i}" for i in range(4)]
    try:
        with (scheduler_beside(kube, settings),
              webhook_beside(kube, settings, tmp_path / "tls", namespace=ns)):
            for name in members:  # 1.5 cores each: the gang needs both nodes
                stored = kube.create("pods", make_pod_dict(
                    name, "1500m", namespace=None, labels={names.GROUP_LABEL: "g"},
                    annotations={names.GROUP_SIZE_ANNOTATION: "4"},
                    nodeSelector={"e2e-ns": ns}, tolerations=fence(ns)), ns)
                assert stored["spec"]["schedulingGroup"] == {"podGroupName": "g"}
            group = wait_for(lambda: kube.get("podgroups", "g", ns), "the PodGroup, made after the"
                         " answers")
            assert group["spec"]["schedulingPolicy"]["gang"] == {"minCount": 4}
            assert group["metadata"]["labels"][names.MANAGED_BY_LABEL] == names.SCHEDULER_NAME
            placed = wait_for(lambda: all(kube.get("pods", m, ns)["spec"].get("nodeName")
                                      for m in members) and
                          {m: kube.get("pods", m, ns)["spec"]["nodeName"] for m in members},
                          "the whole gang bound")
            assert set(placed.values()) <= set(nodes)
    finally:
        for name in members:
            kube.delete("pods", name, ns, grace_period_seconds=0)
        for node in nodes:
            kube.delete("nodes", node)


def test_a_grouped_job_gets_its_podgroup_with_the_job_and_its_pods_bind(
        apiserver: ApiServer, kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    if not apiserver.controller_manager:
        pytest.skip("no kube-controller-manager beside the API server binaries")
    ns = kube_namespace
    settings = load_settings(webhook_config=f"fluence-job-{ns}")
    nodes = fenced_nodes(kube, ns)
    try:
        with (scheduler_beside(kube, settings),
              webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                             resources=("pods", "jobs"))):
            job = kube.create("jobs", {"metadata": {"name": "train"}, "spec": {
                "completionMode": "Indexed", "completions": 4, "parallelism": 4,
                "template": {"metadata": {"labels": {names.GROUP_LABEL: "train"}}, "spec": {
                    "schedulerName": names.SCHEDULER_NAME, "restartPolicy": "Never",
                    "nodeSelector": {"e2e-ns": ns}, "tolerations": fence(ns),
                    "containers": [{"name": "c", "image": "busybox", "resources": {
                        "requests": {"cpu": "1500m"}}}]}}}}, ns)
            assert job["spec"]["template"]["spec"]["schedulingGroup"] == {
                "podGroupName": "train"}
            group = wait_for(lambda: kube.get("podgroups", "train", ns),
                             "the Job's PodGroup, made after the Job's answer")
            assert group["spec"]["schedulingPolicy"]["gang"] == {"minCount": 4}
            assert group["metadata"]["labels"][names.MANAGED_BY_LABEL] == names.SCHEDULER_NAME

            def bound() -> dict[str, str] | None:
                members = kube.list("pods", ns, label_selector=names.GROUP_LABEL).items
                placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in members}
                return placed if len(placed) == 4 and all(placed.values()) else None
            placed = wait_for(bound, "the Job's four pods bound")
            assert set(placed.values()) <= set(nodes)
            for member in kube.list("pods", ns, label_selector=names.GROUP_LABEL).items:
                assert member["spec"]["schedulingGroup"] == {"podGroupName": "train"}
    finally:
        kube.delete("jobs", "train", ns)
        for member in kube.list("pods", ns).items:
            kube.delete("pods", member["metadata"]["name"], ns, grace_period_seconds=0)
        for node in nodes:
            kube.delete("nodes", node)
