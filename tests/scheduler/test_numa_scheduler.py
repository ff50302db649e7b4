"""The scheduler reads NodeResourceTopology objects: a single-numa pod is bound inside one
NUMA zone, a zone change rebuilds its node, and a cluster without the CRD still runs.

On the embedded matcher: Fluxion's NUMA behaviour (zones loaded node by node, as
``FLUENCE_FLUXION_NUMA`` says) is in ``tests/matcher/test_numa.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import NODE_RESOURCE_TOPOLOGIES, ObjectList, ResourceRef
from fluence_core.kube.errors import NotFound
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict
from tests.scheduler.conftest import Harness, node, pod
from tests.test_numa import nrt

SINGLE = {names.SINGLE_NUMA_ANNOTATION: "true"}


@pytest.fixture(autouse=True)
def _embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)


def test_a_single_numa_pod_waits_until_a_zone_holds_it_then_binds(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0", cpu=8), pod("wide", "5", annotations=SINGLE))
    h.cluster.create(NODE_RESOURCE_TOPOLOGIES, nrt("n0", ("node-0", "4", "0"),
                                                   ("node-1", "4", "0")))
    h.restart()
    h.cycle()
    assert h.node_of("wide") is None, "no 4-core zone holds 5 cores"
    h.cluster.replace(NODE_RESOURCE_TOPOLOGIES, {
        **nrt("n0", ("node-0", "6", "0"), ("node-1", "2", "0")),
        "metadata": h.cluster.get(NODE_RESOURCE_TOPOLOGIES, "n0")["metadata"]})
    h.cycle()
    assert h.node_of("wide") == "n0"
    vertex = h.scheduler.graph.node("n0")
    held = [s for a in h.scheduler.matcher.allocations().values() for s in a.nodes]
    assert {vertex.zone_of("core", i) for s in held for i in s.cores} == {0}


def test_a_node_without_a_node_resource_topology_cannot_promise_one_zone(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0", cpu=8), pod("one", "1", annotations=SINGLE), pod("any", "1"))
    h.cycle()
    assert h.node_of("one") is None and h.node_of("any") == "n0"


class _NoTopologyCrd(FakeCluster):
    """A cluster that does not serve NodeResourceTopology (the CRD is not installed)."""

    def list(self, resource: ResourceRef, namespace: str | None = None, **kw: Any) -> ObjectList:
        if resource in (NODE_RESOURCE_TOPOLOGIES, NODE_RESOURCE_TOPOLOGIES.plural):
            raise NotFound(404, "the server could not find the requested resource", "NotFound")
        return super().list(resource, namespace, **kw)


def test_a_cluster_without_the_crd_is_scheduled_without_zones() -> None:
    cluster = _NoTopologyCrd()
    cluster.create("nodes", node("n0"))
    cluster.create("pods", pod("p", "1"), "default")
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    scheduler.pump()
    scheduler.schedule_once()
    assert cluster.get("pods", "p", "default")["spec"].get("nodeName") == "n0"


def _guaranteed(name: str, cpu: str) -> dict[str, Any]:
    """A pod of the Guaranteed QoS class: its limits are its requests."""
    return make_pod_dict(name, cpu, "1Gi", limits={"cpu": cpu, "memory": "1Gi"})


def test_under_the_kubelets_single_numa_node_policy_a_guaranteed_pod_stays_in_one_zone(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("strict", cpu=8), _guaranteed("g", "5"), pod("burstable", "5"))
    h.cluster.create(NODE_RESOURCE_TOPOLOGIES, nrt(
        "strict", ("node-0", "4", "0"), ("node-1", "4", "0"), policy="single-numa-node"))
    h.restart()
    h.cycle()
    assert h.node_of("g") is None, "the kubelet would refuse it: no zone has 5 cores"
    assert h.node_of("burstable") == "strict", "not Guaranteed: the policy does not bind it"


def test_without_the_policy_a_guaranteed_pod_may_span_zones(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("relaxed", cpu=8), _guaranteed("g", "5"))
    h.cluster.create(NODE_RESOURCE_TOPOLOGIES, nrt(
        "relaxed", ("node-0", "4", "0"), ("node-1", "4", "0"), policy="best-effort"))
    h.restart()
    h.cycle()
    assert h.node_of("g") == "relaxed"
