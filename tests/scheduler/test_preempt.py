"""fluence_core.scheduler.preempt: room for a higher-priority group, or nothing touched."""

from __future__ import annotations

from typing import Any, Callable

from fluence_core import names
from fluence_core.kube.api import PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.matcher.group import GroupMatch
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.preempt import Preemptor
from fluence_core.scheduler.records import HeldPlacement
from fluence_core.scheduler.view import ClusterView
from fluence_core.topology import Level
from tests.scheduler.conftest import node, pod, pod_group
from tests.scheduler.parts import cluster_of, started_view


def _as_records(view: ClusterView) -> None:
    """Turn the view's pins (bound pods at start) into held records of lone pods."""
    for (namespace, name), pin in list(view.pins.items()):
        allocation = view.matcher.allocations()[pin.jobid]
        view.records.held[("pods", namespace, name)] = [
            HeldPlacement("pods", namespace, name, [name], {"compute": allocation})]
    view.pins.clear()


def _preemptor_for(cluster: FakeCluster, name: str, *, levels: tuple[Level, ...] = ()
                   ) -> tuple[ClusterView, Callable[[], GroupMatch | None]]:
    """The view of ``cluster`` (bound pods held as records), and room making for its pending
    group ``default/name``, to call once the test has looked at what is held before."""
    view = started_view(cluster, levels=levels)
    _as_records(view)
    pending = next(p for p in g.pending_groups(view.unplaced.values(), view.pod_groups)
                   if p.key == f"default/{name}")
    return view, lambda: Preemptor(cluster, view, view.records).make_room(
        pending, pending.requests())


def test_the_lowest_priority_placement_goes_first_and_only_as_many_as_needed() -> None:
    cluster = cluster_of(node("n0"), pod("low", "2", priority=1, node_name="n0"),
                         pod("mid", "2", priority=5, node_name="n0"),
                         pod("high", "2", priority=100))
    view, make_room = _preemptor_for(cluster, "high")
    match = make_room()
    assert isinstance(match, GroupMatch)
    assert cluster.get(PODS, "low", "default") is None
    assert cluster.get(PODS, "mid", "default") is not None
    assert cluster.events(reason="Preempted", involved_name="low")
    assert ("pods", "default", "low") not in view.records.held, "no empty entry left behind"


def test_nothing_is_evicted_when_even_every_victim_would_not_make_room() -> None:
    cluster = cluster_of(node("n0"), pod("low", "1", priority=1, node_name="n0"),
                         pod("huge", "8", priority=100))
    view, make_room = _preemptor_for(cluster, "huge")
    held = dict(view.matcher.allocations())
    assert make_room() is None
    assert cluster.get(PODS, "low", "default") is not None
    assert dict(view.matcher.allocations()).keys() == held.keys()


def test_protected_and_equal_priority_placements_are_no_victims() -> None:
    protected = pod("quantum", "2", priority=1, node_name="n0",
                    annotations={names.PROTECTED_ANNOTATION: "true"})
    cluster = cluster_of(node("n0"), protected, pod("peer", "2", priority=100, node_name="n0"),
                         pod("high", "4", priority=100))
    _, make_room = _preemptor_for(cluster, "high")
    assert make_room() is None
    assert cluster.get(PODS, "quantum", "default") is not None
    assert cluster.get(PODS, "peer", "default") is not None


RACK_LEVELS = (Level(names.RACK_LABEL, "rack"),)


def _rack_gang_cluster(*bound: dict[str, Any]) -> FakeCluster:
    """Racks r1 (n0, n1) and r2 (n2, n3) of 4-core nodes holding ``bound``, and a pending
    rack-required gang ``g`` of two 4-core pods of priority 100."""
    racked = [node(name, labels={names.RACK_LABEL: rack})
              for name, rack in (("n0", "r1"), ("n1", "r1"), ("n2", "r2"), ("n3", "r2"))]
    group = pod_group("g", 2, topology=[names.RACK_LABEL])
    return cluster_of(*racked, *bound, group, pod("g0", "4", group="g", priority=100),
                      pod("g1", "4", group="g", priority=100))


def test_room_for_a_rack_required_gang_is_made_inside_one_rack_only() -> None:
    cluster = _rack_gang_cluster(
        pod("a", "4", priority=1, node_name="n0"), pod("b", "4", priority=2, node_name="n2"),
        pod("c", "4", priority=3, node_name="n1"), pod("d", "4", priority=4, node_name="n3"))
    _, make_room = _preemptor_for(cluster, "g", levels=RACK_LEVELS)
    match = make_room()
    assert isinstance(match, GroupMatch)
    assert {p.node for p in match.placements.values()} == {"n0", "n1"}
    gone = {name for name in "abcd" if cluster.get(PODS, name, "default") is None}
    assert gone == {"a", "c"}, "b, of lower priority than c, is in the rack the gang does not use"


def test_a_rack_required_gang_is_never_placed_across_racks_by_preemption() -> None:
    cluster = _rack_gang_cluster(
        pod("a", "4", priority=1, node_name="n0"), pod("p1", "4", priority=500, node_name="n1"),
        pod("b", "4", priority=1, node_name="n2"), pod("p3", "4", priority=500, node_name="n3"))
    view, make_room = _preemptor_for(cluster, "g", levels=RACK_LEVELS)
    held = dict(view.matcher.allocations())
    assert make_room() is None
    assert all(cluster.get(PODS, name, "default") is not None for name in ("a", "b"))
    assert dict(view.matcher.allocations()).keys() == held.keys()


def test_groups_preempting_in_one_cycle_take_different_victims() -> None:
    from fluence_core.scheduler.core import Scheduler
    from fluence_core.settings import load_settings

    cluster = cluster_of(node("n0", cpu=2), pod("low0", "1", priority=1),
                         pod("low1", "1", priority=1))
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    scheduler.schedule_once()
    scheduler.pump()
    for i in range(2):
        cluster.create(PODS, pod(f"high{i}", "1", priority=100), "default")
    scheduler.pump()
    results = scheduler.schedule_once()
    assert sorted(r.group for r in results if r.placed) == ["default/high0", "default/high1"]
    assert cluster.get(PODS, "low0", "default") is None
    assert cluster.get(PODS, "low1", "default") is None
    assert scheduler.records.held.keys() == {("pods", "default", "high0"),
                                             ("pods", "default", "high1")}
