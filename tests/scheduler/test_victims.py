"""fluence_core.scheduler.victims: gangs as units, and what a leaving member frees."""

from __future__ import annotations

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Allocation, NodeShare, VirtualShare
from fluence_core.models import NodeInfo, PodRequest
from fluence_core.scheduler.records import HeldPlacement
from fluence_core.scheduler.victims import Holder, Member, disruption, group_priority, without
from fluence_core.testing import make_pod_dict

GRAPH = ResourceGraph([NodeInfo("n0", cores=8, memory_mib=8192),
                       NodeInfo("n1", cores=8, memory_mib=8192)])


def _member(name: str, node: str, request: PodRequest | None = None, *,
            priority: int = 0, since: float = 0.0) -> Member:
    pod = make_pod_dict(name, "2", priority=priority, node_name=node)
    return Member(("default", name), pod, node, HeldPlacement("podgroups", "default", "g", [name]),
                  request or PodRequest(name, cores=2, memory_mib=1024), since)


def test_a_leaving_member_frees_its_own_cores_and_memory_on_its_own_node() -> None:
    held = Allocation(7, (NodeShare("n0", (0, 1, 2, 3), memory=(0, 1), memory_mib=2048, pods=2),
                          NodeShare("n1", (0, 1), memory=(0,), memory_mib=1024, pods=1)))
    kept = without(held, [_member("a", "n0")], GRAPH)
    assert kept is not None and kept.jobid == 7
    shares = {s.node: s for s in kept.nodes}
    assert (len(shares["n0"].cores), shares["n0"].memory_mib, shares["n0"].pods) == (2, 1024, 1)
    assert shares["n1"] == held.nodes[1]


def test_a_leaving_shared_member_gives_back_its_millicores() -> None:
    held = Allocation(3, (NodeShare("n0", millicores=1500, memory_mib=600, pods=3),))
    shared = PodRequest("a", cores=0, memory_mib=200, millicores=500)
    kept = without(held, [_member("a", "n0", shared)], GRAPH)
    assert kept is not None and kept.nodes[0].millicores == 1000
    assert (kept.nodes[0].memory_mib, kept.nodes[0].pods) == (400, 2)


def test_nothing_is_left_when_every_holder_of_an_allocation_leaves() -> None:
    held = Allocation(4, (NodeShare("n0", (0, 1), pods=1),))
    assert without(held, [_member("a", "n0")], GRAPH) is None


def test_a_virtual_allocation_is_kept_while_members_stay() -> None:
    held = Allocation(5, virtual=(VirtualShare("/q/cepheus", "qpu", "cepheus", "cepheus"),))
    assert without(held, [_member("a", "n0")], GRAPH) == held


def test_a_gang_in_pod_mode_loses_members_only_down_to_its_min_count() -> None:
    members = tuple(_member(f"m{i}", "n0") for i in range(4))
    gang = Holder(("podgroups", "default", "g"), members, 1, min_count=3)
    assert gang.closure({("default", "m0")}) == {("default", "m0")}
    two = {("default", "m0"), ("default", "m1")}
    assert gang.closure(two) == {m.key for m in members}, "2 of minCount 3 would stay"


def test_a_gang_in_pod_group_mode_goes_whole_for_any_member() -> None:
    members = tuple(_member(f"m{i}", "n0") for i in range(3))
    gang = Holder(("podgroups", "default", "g"), members, 1, whole=True)
    assert gang.closure({("default", "m2")}) == {m.key for m in members}


def test_fewer_lower_priority_victims_hurt_less_and_later_starts_break_ties() -> None:
    one_low = disruption([(_member("a", "n0"), 1)])
    two_low = disruption([(_member("a", "n0"), 1), (_member("b", "n0"), 1)])
    one_mid = disruption([(_member("c", "n0"), 5)])
    assert one_low.key() < two_low.key() < one_mid.key()
    older = disruption([(_member("a", "n0", since=100.0), 1)])
    newer = disruption([(_member("b", "n0", since=200.0), 1)])
    assert newer.key() < older.key()


def test_a_pod_group_naming_no_priority_class_leaves_its_members_priorities() -> None:
    def classes(name: str) -> int | None:
        return {"vital": 1000}.get(name)

    assert group_priority({"spec": {"priority": 0}}, classes) is None, "the admission's zero"
    assert group_priority({"spec": {"priorityClassName": "vital"}}, classes) == 1000
    assert group_priority({"spec": {"priorityClassName": "vital", "priority": 900}},
                          classes) == 900, "the admission resolved it when the group was made"
    assert group_priority({"spec": {"priority": 7}}, classes) == 7
