"""fluence_core.matcher.pooled: fractional pods share the cores whole-core pods leave."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from fluence_core.errors import MatcherError
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import compute_jobspec
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.base import Allocation, GroupMatcher, MatchOutcome
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.pooled import SHARED_JOBIDS, PooledMatcher, pooled
from fluence_core.models import Group, NodeInfo, PodRequest


def _matcher(*nodes: NodeInfo) -> PooledMatcher:
    graph = ResourceGraph(list(nodes))
    return pooled(EmbeddedMatcher(graph), graph)


def _shared(millicores: int, memory_mib: int = 0, name: str = "p") -> PodRequest:
    return PodRequest(name, cores=0, millicores=millicores, memory_mib=memory_mib)


def _take(matcher: PooledMatcher, pod: PodRequest, count: int = 1,
          node: str | None = None) -> Allocation | None:
    constraint = {"hostlist": [node]} if node else None
    return matcher.match_allocate(compute_jobspec([pod] * count, constraint))


def _cores(matcher: PooledMatcher, cores: int, node: str | None = None) -> Allocation | None:
    return _take(matcher, PodRequest("x", cores=cores), node=node)


def test_a_thousand_tenth_cpu_pods_fit_a_hundred_eight_cpu_nodes() -> None:
    matcher = _matcher(*(NodeInfo(f"n{i}", 8, 8192) for i in range(100)))
    placed = [_take(matcher, _shared(100)) for _ in range(1000)]
    assert all(a is not None for a in placed)


def test_tenths_fill_every_core_exactly() -> None:
    matcher = _matcher(NodeInfo("a", 1, 1024), NodeInfo("b", 1, 1024))
    assert all(_take(matcher, _shared(100)) is not None for _ in range(20))
    assert _take(matcher, _shared(1)) is None
    assert matcher.last_outcome is MatchOutcome.BUSY


def test_whole_cores_and_the_pool_share_one_cpu_budget() -> None:
    matcher = _matcher(NodeInfo("n", 8, 8192))
    assert _take(matcher, _shared(500), 8) is not None          # 4000m in the pool
    assert _cores(matcher, 5) is None                           # 4 cores left, not 5
    assert _cores(matcher, 4) is not None
    assert _take(matcher, _shared(1)) is None                   # nothing left at all


def test_the_pool_gets_what_exclusive_cores_leave() -> None:
    matcher = _matcher(NodeInfo("n", 8, 8192))
    assert _cores(matcher, 6) is not None
    assert _take(matcher, _shared(2001)) is None
    assert _take(matcher, _shared(2000)) is not None


def test_allocatable_above_the_whole_cores_is_the_pools_from_the_start() -> None:
    matcher = _matcher(NodeInfo("n", 7, 8192, millicores=7500))
    assert _cores(matcher, 7) is not None
    assert _take(matcher, _shared(600)) is None
    assert _take(matcher, _shared(500)) is not None


def test_cancelling_gives_the_leased_cores_back() -> None:
    matcher = _matcher(NodeInfo("n", 8, 8192))
    shared = _take(matcher, _shared(100), 30)
    assert shared is not None and _cores(matcher, 6) is None
    matcher.cancel(shared.jobid)
    assert _cores(matcher, 8) is not None


def test_a_lease_stays_while_any_pod_still_draws_on_it() -> None:
    matcher = _matcher(NodeInfo("n", 2, 2048))
    first, second = _take(matcher, _shared(600)), _take(matcher, _shared(600))
    assert first is not None and second is not None            # 1200m: two cores leased
    matcher.cancel(first.jobid)                                 # 600m left: one core back
    assert _cores(matcher, 1) is not None and _cores(matcher, 1) is None


def test_memory_of_shared_pods_is_counted_in_mib_leasing_whole_chunks() -> None:
    matcher = _matcher(NodeInfo("n", 1, 1024))                  # one chunk of 1024 MiB
    assert _take(matcher, _shared(10, 100), 10) is not None     # 1000 MiB
    assert _take(matcher, _shared(10, 25)) is None
    assert _take(matcher, _shared(10, 24)) is not None


def test_shares_say_how_many_pods_and_millicores_each_node_holds() -> None:
    matcher = _matcher(NodeInfo("a", 1, 1024), NodeInfo("b", 1, 1024))
    allocation = _take(matcher, _shared(400), 4)
    assert allocation is not None and allocation.jobid >= SHARED_JOBIDS
    assert [(s.node, s.pods, s.millicores) for s in allocation.nodes] == [("a", 2, 800),
                                                                          ("b", 2, 800)]


def test_a_hostlist_keeps_shared_pods_on_the_nodes_allowed() -> None:
    matcher = _matcher(NodeInfo("a", 1, 1024), NodeInfo("b", 1, 1024))
    allocation = _take(matcher, _shared(400), node="b")
    assert allocation is not None and [s.node for s in allocation.nodes] == ["b"]


def test_a_pod_bigger_than_any_node_can_never_fit() -> None:
    matcher = _matcher(NodeInfo("n", 2, 2048))
    assert _take(matcher, _shared(2500)) is None
    assert matcher.last_outcome is MatchOutcome.UNSATISFIABLE
    assert not matcher.satisfiable(compute_jobspec([_shared(2500)]))
    assert matcher.satisfiable(compute_jobspec([_shared(1500)]))


def test_allocations_list_shared_jobs_not_the_pools_leases() -> None:
    matcher = _matcher(NodeInfo("n", 4, 4096))
    shared, whole = _take(matcher, _shared(1500)), _cores(matcher, 1)
    assert shared is not None and whole is not None
    assert set(matcher.allocations()) == {shared.jobid, whole.jobid}


def test_a_shared_allocation_restores_from_its_record_into_a_fresh_matcher() -> None:
    matcher = _matcher(NodeInfo("n", 2, 2048))
    allocation = _take(matcher, _shared(1500), node="n")
    assert allocation is not None
    record = Allocation.from_json(allocation.to_json())
    fresh = _matcher(NodeInfo("n", 2, 2048))
    fresh.restore(record)
    assert _cores(fresh, 1) is None and _take(fresh, _shared(500)) is not None
    with pytest.raises(MatcherError, match="already held"):
        fresh.restore(record)


@pytest.mark.parametrize("kind", ["whole-core", "shared"])
def test_a_record_numbered_in_the_other_kinds_id_space_is_refused_and_holds_nothing(
    kind: str,
) -> None:
    matcher = _matcher(NodeInfo("n", 2, 2048))
    allocation = _cores(matcher, 1) if kind == "whole-core" else _take(matcher, _shared(500))
    assert allocation is not None
    wrong = SHARED_JOBIDS * 2 if kind == "whole-core" else 7
    record = Allocation.from_json(allocation.to_json().replace(
        f'"jobid":{allocation.jobid}', f'"jobid":{wrong}'))
    fresh = _matcher(NodeInfo("n", 2, 2048))
    with pytest.raises(MatcherError, match=f"cannot restore job {wrong}: its id is"):
        fresh.restore(record)
    assert fresh.allocations() == {}
    assert _cores(fresh, 2) is not None, "nothing was held"


def test_restoring_more_than_the_node_has_is_refused() -> None:
    matcher = _matcher(NodeInfo("n", 2, 2048))
    allocation = _take(matcher, _shared(1500))
    assert allocation is not None
    small = _matcher(NodeInfo("n", 1, 1024))
    with pytest.raises(MatcherError, match="no room"):
        small.restore(allocation)
    assert _cores(small, 1) is not None                         # nothing was left held


def test_a_gang_of_whole_core_and_shared_pods_is_held_together_or_not_at_all() -> None:
    matcher = _matcher(NodeInfo("n", 4, 4096))
    assert isinstance(matcher, GroupMatcher)
    graph = matcher.graph
    group = Group("g", (PodRequest("w", cores=3), _shared(900, name="s1"), _shared(200, name="s2")))
    assert not isinstance(match_group(group, graph, matcher), GroupMatch)   # 4100m > 4000m
    assert matcher.allocations() == {}
    fits = Group("g", (PodRequest("w", cores=3), _shared(900, name="s1"), _shared(100, name="s2")))
    outcome = match_group(fits, graph, matcher)
    assert isinstance(outcome, GroupMatch)
    assert {p.node for p in outcome.placements.values()} == {"n"}


def test_shared_pods_stop_at_the_nodes_pod_limit() -> None:
    matcher = _matcher(NodeInfo("a", 16, 65536, max_pods=110), NodeInfo("b", 16, 65536,
                                                                         max_pods=110))
    placed = [_take(matcher, _shared(100)) for _ in range(220)]
    assert all(a is not None for a in placed), "16 cores hold 160 tenths, the kubelet 110 pods"
    on = {node: sum(s.pods for a in placed if a for s in a.nodes if s.node == node)
          for node in ("a", "b")}
    assert on == {"a": 110, "b": 110}
    assert _take(matcher, _shared(100)) is None
    assert matcher.last_outcome is MatchOutcome.BUSY


def test_whole_core_pods_count_toward_the_limit_shared_pods_meet() -> None:
    matcher = _matcher(NodeInfo("a", 8, 8192, max_pods=3), NodeInfo("b", 8, 8192, max_pods=3))
    assert _cores(matcher, 1, node="a") is not None
    assert _cores(matcher, 1, node="a") is not None
    first = _take(matcher, _shared(100))
    assert first is not None and first.nodes[0].node == "a"
    second = _take(matcher, _shared(100))
    assert second is not None and second.nodes[0].node == "b", "a has its 3 pods"
    assert _take(matcher, _shared(100), node="a") is None
    matcher.cancel(first.jobid)
    assert _take(matcher, _shared(100), node="a") is not None, "a pod gone, a slot back"


def test_a_restored_shared_allocation_counts_its_pods() -> None:
    node = NodeInfo("a", 4, 4096, max_pods=2)
    held = _take(_matcher(node), _shared(100), count=2)
    assert held is not None
    restarted = _matcher(node)
    restarted.restore(Allocation.from_json(held.to_json()))
    assert _take(restarted, _shared(100)) is None


def test_a_node_whose_cores_whole_core_pods_hold_is_offered_again_once_one_is_given_back(
) -> None:
    matcher = _matcher(NodeInfo("a", 2, 2048), NodeInfo("b", 2, 2048))
    whole = _cores(matcher, 2, node="a")
    assert whole is not None
    first = _take(matcher, _shared(500))
    assert first is not None and first.nodes[0].node == "b", "a's cores are all held"
    assert _take(matcher, _shared(2000)) is None, "b has 1500m left, a none"
    matcher.cancel(whole.jobid)
    again = _take(matcher, _shared(2000))
    assert again is not None and again.nodes[0].node == "a"


def test_a_short_hostlist_is_walked_and_a_long_one_filters_what_the_index_offers() -> None:
    nodes = [NodeInfo(f"n{i}", 2, 2048) for i in range(100)]
    matcher = _matcher(*nodes)
    few = _take(matcher, _shared(100), node="n57")
    assert few is not None and few.nodes[0].node == "n57"
    for first, expected in ((30, "n57"), (60, "n60")):  # a pool with room first, then leasing
        many = [f"n{i}" for i in range(first, 100)]
        spec = compute_jobspec([_shared(100)], {"and": [{"properties": ["virtual=false"]},
                                                        {"hostlist": many}]})
        placed = matcher.match_allocate(spec)
        assert placed is not None and placed.nodes[0].node == expected


def test_a_node_taken_down_gets_no_shared_pod_until_it_is_up() -> None:
    matcher = _matcher(NodeInfo("a", 2, 2048), NodeInfo("b", 2, 2048))
    matcher.set_node_down("a")
    placed = _take(matcher, _shared(100))
    assert placed is not None and placed.nodes[0].node == "b"
    assert _take(matcher, _shared(2000)) is None, "b has 1900m left"
    matcher.set_node_down("a", False)
    back = _take(matcher, _shared(2000))
    assert back is not None and back.nodes[0].node == "a"


class _CountingMatcher(EmbeddedMatcher):
    """The embedded matcher, counting the leases the pool asks of each node."""

    def __init__(self, graph: ResourceGraph) -> None:
        super().__init__(graph)
        self.asked: dict[str, int] = {}

    def match_allocate(self, jobspec: Mapping[str, Any]) -> Allocation | None:
        for term in jobspec["attributes"]["system"]["constraints"].get("and", []):
            for node in term.get("hostlist", []):
                self.asked[node] = self.asked.get(node, 0) + 1
        return super().match_allocate(jobspec)


def test_a_node_whose_memory_chunks_are_all_held_is_not_asked_for_one_by_every_pod() -> None:
    graph = ResourceGraph([NodeInfo("a", 4, 1024), NodeInfo("b", 4, 4096)])
    inner = _CountingMatcher(graph)
    matcher = pooled(inner, graph)
    pods = [_take(matcher, _shared(100, 512)) for _ in range(6)]
    assert [p.nodes[0].node if p else None for p in pods] == ["a", "a"] + ["b"] * 4
    assert inner.asked["a"] == 1 + 4 + 1, "a core, four chunks, one refused chunk: no more"


def test_a_node_short_of_memory_is_offered_again_once_a_pod_leaves_it() -> None:
    graph = ResourceGraph([NodeInfo("a", 2, 2048)])
    matcher = pooled(EmbeddedMatcher(graph), graph)
    first = _take(matcher, _shared(100, 2048))
    assert first is not None
    assert _take(matcher, _shared(100, 512)) is None
    matcher.cancel(first.jobid)
    again = _take(matcher, _shared(100, 512))
    assert again is not None and again.nodes[0].node == "a"


def test_a_pod_asking_less_memory_than_one_refused_still_leases_chunks_there() -> None:
    matcher = _matcher(NodeInfo("a", 4, 2048))
    assert _take(matcher, _shared(100, 4096)) is None
    smaller = _take(matcher, _shared(100, 1024))
    assert smaller is not None and smaller.nodes[0].node == "a"
