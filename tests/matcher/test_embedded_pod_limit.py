"""The embedded matcher counts pod slots against each node's allocatable ``pods``."""

from __future__ import annotations

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import compute_jobspec
from fluence_core.matcher.base import Allocation
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.models import NodeInfo, PodRequest


def _one(name: str) -> dict:
    return compute_jobspec([PodRequest(name, cores=1)])


def test_a_node_takes_no_more_slots_than_its_pod_limit() -> None:
    matcher = EmbeddedMatcher(ResourceGraph([NodeInfo("n0", 8, 8192, max_pods=2)]))
    first, second = matcher.match_allocate(_one("a")), matcher.match_allocate(_one("b"))
    assert first is not None and second is not None
    assert matcher.match_allocate(_one("c")) is None, "8 cores free, but the kubelet admits 2 pods"
    assert matcher.satisfiable(_one("c"))
    matcher.cancel(first.jobid)
    assert matcher.match_allocate(_one("c")) is not None


def test_a_gang_spreads_when_a_node_reaches_its_pod_limit() -> None:
    graph = ResourceGraph(
        [NodeInfo("n0", 8, 8192, max_pods=2), NodeInfo("n1", 8, 8192, max_pods=2)]
    )
    allocation = EmbeddedMatcher(graph, "lonode").match_allocate(
        compute_jobspec([PodRequest(f"p{i}", cores=1) for i in range(3)]))
    assert allocation is not None
    assert {s.node: s.pods for s in allocation.nodes} == {"n0": 2, "n1": 1}


def test_a_restored_allocation_takes_its_pod_slots_again() -> None:
    graph = ResourceGraph([NodeInfo("n0", 8, 8192, max_pods=2)])
    held = EmbeddedMatcher(graph).match_allocate(
        compute_jobspec([PodRequest(f"p{i}", cores=1) for i in range(2)])
    )
    assert held is not None
    restarted = EmbeddedMatcher(graph)
    restarted.restore(Allocation.from_json(held.to_json()))
    assert restarted.match_allocate(_one("late")) is None


def test_no_pod_limit_means_cores_decide() -> None:
    matcher = EmbeddedMatcher(ResourceGraph([NodeInfo("n0", 4, 4096)]))
    assert all(matcher.match_allocate(_one(f"p{i}")) is not None for i in range(4))
    assert matcher.match_allocate(_one("p4")) is None
