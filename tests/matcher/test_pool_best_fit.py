"""Lone fractional pods, placed by the shared pool, fill partly used racks first, so whole
racks stay free for gangs; and a domain's free cores leave out those leased to the pool."""

from __future__ import annotations

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.domains import hierarchy, rooms
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.jobspec import compute_jobspec
from fluence_core.matcher.pooled import PooledMatcher, pooled
from fluence_core.models import Group, PodRequest
from tests.matcher.test_topology import RACK_ONLY, gang, racks, racks_of


def _racked(*sizes: int, cores: int = 4) -> tuple[ResourceGraph, PooledMatcher]:
    graph = ResourceGraph(racks(*sizes, cores=cores), levels=RACK_ONLY)
    return graph, pooled(EmbeddedMatcher(graph), graph)


def _single(name: str, millicores: int) -> Group:
    return Group(name, (PodRequest(name, cores=0, millicores=millicores),))


def _place(graph: ResourceGraph, matcher: PooledMatcher, group: Group) -> set[str]:
    result = match_group(group, graph, matcher)
    assert isinstance(result, GroupMatch), group.name
    return racks_of(graph, result)


def test_singles_go_to_the_partly_used_rack_and_whole_racks_stay_free() -> None:
    graph, matcher = _racked(2, 2, 2)
    assert _place(graph, matcher, gang(1, cores=3, name="first")) == {"r0"}
    used = set()
    for i in range(10):  # 10 x 700m: 7 cores' worth, more than the 5 cores r0 has left
        used |= _place(graph, matcher, _single(f"s{i}", 700))
    assert used == {"r0", "r1"}, "r0 first, then the next rack; r2 untouched"
    free = rooms(graph, matcher, 0)
    assert free[("r2",)].free_cores == 8
    assert _place(graph, matcher, gang(2, cores=4, name="big")) == {"r2"}


def test_the_tightest_rack_wins_even_when_it_comes_last_in_rank_order() -> None:
    graph, matcher = _racked(2, 2, 2)
    pinned = compute_jobspec([PodRequest("x", cores=3)], {"hostlist": ["r2-n0"]})
    assert matcher.match_allocate(pinned) is not None
    for i in range(4):  # rank order alone would open a core of r0
        assert _place(graph, matcher, _single(f"s{i}", 500)) == {"r2"}
    free = {d[0]: r.free_cores for d, r in rooms(graph, matcher, 0).items()}
    assert free == {"r0": 8, "r1": 8, "r2": 3}


def test_within_a_rack_the_node_with_fewest_free_cores_takes_the_lease() -> None:
    graph, matcher = _racked(3)
    result = match_group(gang(1, cores=3, name="a"), graph, matcher)
    assert isinstance(result, GroupMatch)
    busy = next(p.node for p in result.placements.values())
    single = match_group(_single("s", 500), graph, matcher)
    assert isinstance(single, GroupMatch)
    assert next(p.node for p in single.placements.values()) == busy


def test_a_domains_free_cores_leave_out_the_cores_leased_to_the_pool() -> None:
    graph, matcher = _racked(1, 1)
    for i in range(3):  # 3 x 600m: two cores leased on one node
        _place(graph, matcher, _single(f"s{i}", 600))
    free = {d[0]: r.free_cores for d, r in rooms(graph, matcher, 0).items()}
    assert sorted(free.values()) == [2, 4]
    rows = {row.domain: row.room.free_cores for row in hierarchy(graph, matcher)}
    assert sorted(rows.values()) == [2, 4]


def test_leases_given_back_free_the_domains_cores_again() -> None:
    graph, matcher = _racked(1, 1)
    result = match_group(_single("s", 1500), graph, matcher)
    assert isinstance(result, GroupMatch)
    assert sorted(r.free_cores for r in rooms(graph, matcher, 0).values()) == [2, 4]
    for allocation in result.allocations.values():
        matcher.cancel(allocation.jobid)
    assert sorted(r.free_cores for r in rooms(graph, matcher, 0).values()) == [4, 4]
    assert _place(graph, matcher, gang(2, cores=4, name="g")) == {"r0", "r1"}
