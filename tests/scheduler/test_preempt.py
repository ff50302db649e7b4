"""fluence_core.scheduler.preempt: room for a higher-priority group, or nothing touched."""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest

from fluence_core import names
from fluence_core.kube.api import PODS, PRIORITY_CLASSES
from fluence_core.kube.fake import FakeCluster
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_preferring
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.preempt import Preemptor
from fluence_core.scheduler.records import HeldPlacement
from fluence_core.scheduler.view import ClusterView
from fluence_core.topology import Level
from tests.scheduler.conftest import Harness, node, pod, pod_group
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
    assert sorted(r.group for r in results if "terminate" in str(r.reason)) == [
        "default/high0", "default/high1"], "both nominated, each for a victim of its own"
    assert cluster.get(PODS, "low0", "default") is None
    assert cluster.get(PODS, "low1", "default") is None
    scheduler.pump()
    results = scheduler.schedule_once()
    assert sorted(r.group for r in results if r.placed) == ["default/high0", "default/high1"]
    assert scheduler.records.held.keys() == {("pods", "default", "high0"),
                                             ("pods", "default", "high1")}


def _gone(cluster: FakeCluster, *names_: str) -> set[str]:
    return {name for name in names_ if cluster.get(PODS, name, "default") is None}


def test_the_least_disruptive_rack_is_chosen_for_a_rack_required_gang() -> None:
    cluster = _rack_gang_cluster(
        pod("a0", "4", priority=1, node_name="n0"), pod("a1", "4", priority=1, node_name="n1"),
        pod("b0", "4", priority=1, node_name="n2"))
    _, make_room = _preemptor_for(cluster, "g", levels=RACK_LEVELS)
    match = make_room()
    assert isinstance(match, GroupMatch)
    assert {p.node for p in match.placements.values()} == {"n2", "n3"}
    assert _gone(cluster, "a0", "a1", "b0") == {"b0"}


def test_a_pod_takes_the_node_whose_victims_have_the_lowest_priority_not_the_lowest_first(
) -> None:
    low = [pod(f"x{i}", "1", priority=p, node_name="n0") for i, p in enumerate((1, 1, 5, 5))]
    low += [pod(f"y{i}", "1", priority=2, node_name="n1") for i in range(4)]
    cluster = cluster_of(node("n0"), node("n1"), *low, pod("high", "4", priority=100))
    _, make_room = _preemptor_for(cluster, "high")
    match = make_room()
    assert isinstance(match, GroupMatch) and match.placements["default/high"].node == "n1"
    names_ = [f"x{i}" for i in range(4)] + [f"y{i}" for i in range(4)]
    assert _gone(cluster, *names_) == {"y0", "y1", "y2", "y3"}


def test_the_most_important_victims_are_reprieved_while_the_preemptor_still_fits() -> None:
    cluster = cluster_of(node("n0"), pod("a", "1", priority=1, node_name="n0"),
                         pod("b", "2", priority=2, node_name="n0"),
                         pod("c", "1", priority=3, node_name="n0"),
                         pod("high", "2", priority=100))
    _, make_room = _preemptor_for(cluster, "high")
    assert isinstance(make_room(), GroupMatch)
    assert _gone(cluster, "a", "b", "c") == {"b"}


def test_among_equal_victims_the_node_whose_victims_started_last_is_chosen() -> None:
    cluster = cluster_of(node("n0", cpu=2), node("n1", cpu=2),
                         pod("older", "2", priority=1, node_name="n0"),
                         pod("newer", "2", priority=1, node_name="n1"),
                         pod("high", "2", priority=100))
    for name, started in (("older", "2026-01-01T00:00:00Z"), ("newer", "2026-01-02T00:00:00Z")):
        cluster.patch_status(PODS, name, {"status": {"startTime": started}}, "default")
    _, make_room = _preemptor_for(cluster, "high")
    assert isinstance(make_room(), GroupMatch)
    assert _gone(cluster, "older", "newer") == {"newer"}


def _placed_gang(h: Harness, *, min_count: int, members: int, late: int = 0,
                 mode: str | None = None, **spec: Any) -> list[str]:
    """A gang ``g`` of ``members`` 2-core pods of priority 1 placed by ``h``'s scheduler, and
    ``late`` more placed after it as late members (a record each): their names."""
    group = pod_group("g", min_count)
    if mode is not None:
        group["spec"]["disruptionMode"] = mode
    group["spec"].update(spec)
    h.add(group, *(pod(f"g{i}", "2", group="g", priority=1) for i in range(members)))
    h.cycle()
    for i in range(members, members + late):
        h.add(pod(f"g{i}", "2", group="g", priority=1))
        h.cycle()
    names_ = [f"g{i}" for i in range(members + late)]
    assert all(h.node_of(name) for name in names_)
    return names_


def _running(h: Harness, names_: list[str]) -> list[str]:
    return [name for name in names_ if h.cluster.get(PODS, name, "default") is not None]


def test_a_gang_gives_one_member_not_a_record_when_one_members_room_is_enough(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0"), node("n1"))
    members = _placed_gang(h, min_count=3, members=3, late=1)
    records = h.scheduler.records.held[("podgroups", "default", "g")]
    assert len(records) == 2, "the late member holds a record of its own"
    h.add(pod("high", "2", priority=100))
    h.cycle()
    assert len(_running(h, members)) == 3
    h.cycle()
    assert h.node_of("high") is not None
    held = h.scheduler.records.held[("podgroups", "default", "g")]
    assert sorted(p for r in held for p in r.pods) == sorted(_running(h, members))


def test_a_gang_that_would_fall_below_its_min_count_goes_whole(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0"), node("n1"))
    members = _placed_gang(h, min_count=3, members=3, late=1)
    h.add(pod("high", "4", priority=100))
    h.cycle()
    assert _running(h, members) == []
    assert ("podgroups", "default", "g") not in h.scheduler.records.held


def test_a_gang_under_disruption_mode_pod_group_goes_whole_or_not_at_all(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0"), node("n1"))
    members = _placed_gang(h, min_count=1, members=3, late=1, mode="PodGroup")
    h.add(pod("high", "2", priority=100))
    h.cycle()
    assert _running(h, members) == []


def test_a_pod_group_s_own_priority_counts_for_its_members(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0"), node("n1"))
    members = _placed_gang(h, min_count=1, members=4, priority=1000)
    h.add(pod("high", "2", priority=100))
    h.cycle()
    assert _running(h, members) == members
    assert h.node_of("high") is None


def test_a_pod_group_s_priority_class_counts_for_its_members(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0"), node("n1"))
    h.cluster.create(PRIORITY_CLASSES, {"metadata": {"name": "vital"}, "value": 1000})
    members = _placed_gang(h, min_count=1, members=4, priorityClassName="vital")
    h.add(pod("high", "2", priority=100))
    h.cycle()
    assert _running(h, members) == members


def test_the_preemptor_waits_while_its_victims_terminate_then_takes_the_room() -> None:
    cluster = cluster_of(node("n0"), pod("low", "4", priority=1, node_name="n0"),
                         pod("high", "4", priority=100), pod("other", "4", priority=50))
    view = started_view(cluster)
    _as_records(view)
    preemptor = Preemptor(cluster, view, view.records)
    pending = {p.key: p for p in g.pending_groups(view.unplaced.values(), view.pod_groups)}
    match = preemptor.make_room(pending["default/high"], pending["default/high"].requests())
    assert isinstance(match, GroupMatch)
    assert "terminate" in str(preemptor.claim(pending["default/high"]))
    other = match_preferring(pending["default/other"].requests(), view.graph, view.matcher)
    assert isinstance(other, GroupMiss), "the room made is held for the preemptor"
    low = view.pods[("default", "low")]
    view.handle(PODS.plural, "DELETED", low)
    claimed = preemptor.claim(pending["default/high"])
    assert not isinstance(claimed, str) and claimed is not None
    assert claimed.match is match


def test_the_room_held_for_a_group_no_longer_pending_is_given_back() -> None:
    cluster = cluster_of(node("n0"), pod("low", "4", priority=1, node_name="n0"),
                         pod("high", "4", priority=100))
    view = started_view(cluster)
    _as_records(view)
    preemptor = Preemptor(cluster, view, view.records)
    pending = g.pending_groups(view.unplaced.values(), view.pod_groups)[0]
    match = preemptor.make_room(pending, pending.requests())
    assert isinstance(match, GroupMatch)
    held = match.allocations["compute"].jobid
    assert held in view.matcher.allocations()
    preemptor.keep_only([])
    assert held not in view.matcher.allocations()


def test_a_terminating_victim_still_holds_what_its_preemptor_left_of_its_room() -> None:
    cluster = cluster_of(node("n0"), pod("low", "4", priority=1, node_name="n0"),
                         pod("high", "2", priority=100), pod("other", "2"))
    view = started_view(cluster)
    _as_records(view)
    pending = {p.key: p for p in g.pending_groups(view.unplaced.values(), view.pod_groups)}
    assert isinstance(Preemptor(cluster, view, view.records).make_room(
        pending["default/high"], pending["default/high"].requests()), GroupMatch)
    terminating = dict(view.pods[("default", "low")])
    terminating["metadata"] = {**terminating["metadata"],
                               "deletionTimestamp": "2026-01-01T00:00:00Z"}
    view.handle(PODS.plural, "MODIFIED", terminating)
    other = match_preferring(pending["default/other"].requests(), view.graph, view.matcher)
    assert isinstance(other, GroupMiss), "placed beside a victim still running"


FLUXION_LIB = os.environ.get("FLUENCE_FLUXION_LIB")
MATCHERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("fluxion", id="fluxion", marks=pytest.mark.skipif(
        not FLUXION_LIB, reason="FLUENCE_FLUXION_LIB is not set (flux-sched's libreapi_cli)")),
]


@pytest.mark.parametrize("matcher", MATCHERS)
def test_both_matchers_evict_one_nodes_worth_of_the_least_important_pods(
        matcher: str, harness_factory: Callable[..., Harness],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if matcher == "embedded":
        monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)
    low = [pod(f"x{i}", "1", priority=p, node_name="n0") for i, p in enumerate((1, 1, 5, 5))]
    low += [pod(f"y{i}", "1", priority=2, node_name="n1") for i in range(4)]
    h = harness_factory(node("n0"), node("n1"), *low)
    assert h.scheduler.view.matcher.name.endswith(matcher), h.scheduler.view.matcher.name
    h.cycle()
    h.add(pod("big", "4", priority=100))
    h.cycle()
    h.cycle()
    names_ = [f"x{i}" for i in range(4)] + [f"y{i}" for i in range(4)]
    assert _gone(h.cluster, *names_) == {"y0", "y1", "y2", "y3"}
    assert h.node_of("big") == "n1"


@pytest.mark.parametrize("matcher", MATCHERS)
def test_both_matchers_free_one_node_of_equal_pods_for_a_pod_that_needs_one_node(
        matcher: str, harness_factory: Callable[..., Harness],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if matcher == "embedded":
        monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)
    low = [pod(f"p{i}", "1", priority=1, node_name=f"n{i % 2}") for i in range(8)]
    h = harness_factory(node("n0"), node("n1"), *low)
    assert h.scheduler.view.matcher.name.endswith(matcher), h.scheduler.view.matcher.name
    h.cycle()
    h.add(pod("big", "4", priority=100))
    h.cycle()
    h.cycle()
    gone = _gone(h.cluster, *(f"p{i}" for i in range(8)))
    assert len(gone) == 4 and h.node_of("big") is not None
    assert {int(name[1:]) % 2 for name in gone} == {int(h.node_of("big")[1:])}


def test_a_gang_bound_to_no_domain_takes_the_least_important_room_it_needs() -> None:
    cluster = cluster_of(node("n0"), node("n1"), node("n2"),
                         pod("a", "4", priority=1, node_name="n0"),
                         pod("b", "4", priority=3, node_name="n1"),
                         pod("c", "2", priority=2, node_name="n2"),
                         pod("d", "2", priority=1, node_name="n2"),
                         pod_group("g", 2), pod("g0", "4", group="g", priority=100),
                         pod("g1", "4", group="g", priority=100))
    _, make_room = _preemptor_for(cluster, "g")
    match = make_room()
    assert isinstance(match, GroupMatch)
    assert {p.node for p in match.placements.values()} == {"n0", "n2"}
    assert _gone(cluster, "a", "b", "c", "d") == {"a", "c", "d"}
