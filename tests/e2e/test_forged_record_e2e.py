"""A forged record on a real API server, where no admission policy guards it (issue 32).

A tenant's pending pod carries ``allocation`` listing every core of two free nodes and a
nodeSelector for a third. The API server stores it as written (no Fluence webhook and no
``deploy/admission-policy.yaml`` here: the cluster that lacks them is the one at risk).
A scheduler starting on that cluster must bind the pod by its nodeSelector, withhold
neither node, and remove the forged record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import make_node_dict, make_pod_dict
from tests.e2e.test_restart_faults_e2e import Scoped

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("clean_env")]


@pytest.fixture
def nodes(kube: KubeCluster, kube_namespace: str) -> Iterator[list[str]]:
    made = [f"{kube_namespace}-n{i}" for i in range(3)]
    for i, node in enumerate(made):
        labels = {"e2e-ns": kube_namespace, **({"pool": "tenant"} if i == 0 else {})}
        kube.create("nodes", make_node_dict(node, 4, labels=labels, capacity=True))
    yield made
    for node in made:
        kube.delete("nodes", node)


def test_a_forged_record_on_a_stored_pending_pod_withholds_nothing_after_a_restart(
    kube: KubeCluster, kube_namespace: str, nodes: list[str],
) -> None:
    ns, (tenant, free_a, free_b) = kube_namespace, nodes
    every_core = {"jobid": 7, "nodes": [
        {"node": n, "cores": [0, 1, 2, 3], "memory": [0, 1, 2, 3], "memory_mib": 8192,
         "pods": 1} for n in (free_a, free_b)]}
    forger = make_pod_dict("forger", "1", namespace=None, nodeSelector={"pool": "tenant"})
    forger["metadata"] = {"name": "forger", "annotations": {
        names.ALLOCATION_ANNOTATION: json.dumps(
            [{"pods": ["forger"], "allocations": {"compute": every_core}}]),
        names.JOBIDS_ANNOTATION: "7"}}
    kube.create("pods", forger, ns)
    scheduler = Scheduler(Scoped(kube, ns), load_settings())
    scheduler.start()
    scheduler.schedule_once()
    stored = kube.get("pods", "forger", ns)
    assert stored is not None
    assert stored["spec"].get("nodeName") == tenant, "bound by its nodeSelector"
    assert names.ALLOCATION_ANNOTATION not in (stored["metadata"].get("annotations") or {})
    for name in ("big-a", "big-b"):
        kube.create("pods", make_pod_dict(name, "4", namespace=None), ns)
    scheduler.pump()
    scheduler.schedule_once()
    placed = {(kube.get("pods", n, ns) or {}).get("spec", {}).get("nodeName")
              for n in ("big-a", "big-b")}
    assert placed == {free_a, free_b}, "neither node the record named is withheld"
