"""A scheduler killed at any step of placing gangs, then restarted, leaves every gang whole.

The scenario: 4 nodes of 4 cores; gangs ``a`` (4 pods of 2 cores), ``b`` (2 pods
of 2 cores and one of 1: two shapes) and ``c`` (3 pods of 2 cores, which waits:
it does not fit beside the others). The first scheduler is killed just before
its n-th write, for every n up to the last write of placing ``a`` and ``b``
(the match is done when the record write starts; the record, each bind, each
event and the PodGroup condition are writes). A second scheduler starts on what
the cluster kept, runs until nothing changes, and the invariants are checked;
then gang ``a`` finishes and ``c`` must be placed whole.

A property test does the same for random clusters and gangs, killed at a
random write and again at a random write of the restarted scheduler.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from tests.scheduler.conftest import node, pod, pod_group
from tests.scheduler.faults import Faulty, Killed, check_invariants, quiesce

pytestmark = pytest.mark.usefixtures("clean_env")

GANGS = {"a": ["2", "2", "2", "2"], "b": ["2", "2", "1"], "c": ["2", "2", "2"]}


def populated() -> FakeCluster:
    cluster = FakeCluster()
    for i in range(4):
        cluster.create(NODES, node(f"n{i}", cpu=4))
    for gang, cpus in GANGS.items():
        cluster.create(PODGROUPS, pod_group(gang, len(cpus)), "default")
        for i, cpu in enumerate(cpus):
            cluster.create(PODS, pod(f"{gang}-{i}", cpu, group=gang), "default")
    return cluster


@functools.cache
def _manager() -> FluencePluginManager:
    """One plugin manager for every scheduler here (loading the plugins takes 0.2 s)."""
    return get_plugin_manager(load_settings())


def scheduler_on(cluster: Any) -> Scheduler:
    """A scheduler that tries a failed group again at once (backoff has tests of its own)."""
    return Scheduler(cluster, load_settings(pod_initial_backoff_seconds=0), _manager())


def first_run_writes() -> list[str]:
    """Every write an uninterrupted first scheduler makes while placing ``a`` and ``b``."""
    faulty = Faulty(populated())
    scheduler = scheduler_on(faulty)
    scheduler.start()
    quiesce(scheduler)
    return faulty.writes


WRITES = first_run_writes()


def finish(cluster: FakeCluster, gang: str) -> None:
    for i in range(len(GANGS[gang])):
        cluster.patch_status(PODS, f"{gang}-{i}", {"status": {"phase": "Succeeded"}}, "default")


def bound(cluster: FakeCluster, gang: str) -> dict[str, str]:
    pods = (cluster.get(PODS, f"{gang}-{i}", "default") for i in range(len(GANGS[gang])))
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods if p}


def test_the_uninterrupted_run_places_a_and_b_whole_and_c_waits() -> None:
    assert sum(w.startswith("bind") for w in WRITES) == 7
    assert any(w.startswith("patch_status podgroups/") for w in WRITES)


def run_until_killed(scheduler: Scheduler) -> bool:
    """Start and run ``scheduler`` until it dies or nothing changes; whether it died."""
    try:
        scheduler.start()
        quiesce(scheduler)
    except Killed:
        return True
    return False


@pytest.mark.parametrize(
    "kill_at", range(1, len(WRITES) + 2),
    ids=[f"before-{i + 1}-{w}" for i, w in enumerate(WRITES)] + ["after-the-last-write"],
)
def test_a_kill_at_any_write_then_a_restart_keeps_every_gang_whole(kill_at: int) -> None:
    cluster = populated()
    assert run_until_killed(scheduler_on(Faulty(cluster, kill_at))) == (kill_at <= len(WRITES))
    restarted = scheduler_on(cluster)
    restarted.start()
    quiesce(restarted)
    check_invariants(cluster, restarted)
    for gang in ("a", "b"):
        nodes = bound(cluster, gang)
        assert all(nodes.values()), f"gang {gang} not placed after the restart: {nodes}"
    assert not any(bound(cluster, "c").values()), "c does not fit beside a and b"
    finish(cluster, "a")
    quiesce(restarted)
    check_invariants(cluster, restarted)
    assert all(bound(cluster, "c").values()), "c is placed whole once a finished"


@pytest.mark.parametrize("second_kill", range(1, 6))  # bind a-2, event, bind a-3, event, condition
def test_a_second_kill_while_keeping_the_promise_still_ends_whole(second_kill: int) -> None:
    cluster = populated()
    first_binds = [i for i, w in enumerate(WRITES, 1) if w.startswith("bind default/a-")]
    first = scheduler_on(Faulty(cluster, first_binds[2]))  # a-0 and a-1 bound, then killed
    with pytest.raises(Killed):
        first.start()
        quiesce(first)
    second = scheduler_on(Faulty(cluster, second_kill))
    with pytest.raises(Killed):
        second.start()
        quiesce(second)
    third = scheduler_on(cluster)
    third.start()
    quiesce(third)
    check_invariants(cluster, third)
    assert all(bound(cluster, "a").values()) and all(bound(cluster, "b").values())


def test_a_restart_binds_the_rest_of_a_cut_gang_where_its_record_says_before_placing() -> None:
    cluster = populated()
    binds = [i for i, w in enumerate(WRITES, 1) if w.startswith("bind default/a-")]
    first = scheduler_on(Faulty(cluster, binds[2]))
    with pytest.raises(Killed):
        first.start()
        quiesce(first)
    assert [n for n in bound(cluster, "a").values() if n] and not all(bound(cluster, "a").values())
    restarted = scheduler_on(cluster)
    restarted.start()  # no cycle yet: the promise is kept by start itself
    nodes = bound(cluster, "a")
    assert all(nodes.values()), nodes
    record_nodes = {s.node for r in restarted.records.held[("podgroups", "default", "a")]
                    for a in r.allocations.values() for s in a.nodes}
    assert set(nodes.values()) == record_nodes


def _cut_gang_a(cluster: FakeCluster) -> tuple[set[str], list[str]]:
    """Kill the first scheduler once it bound two members of ``a``: the nodes they run on,
    and the nodes the record holds where no member runs yet."""
    binds = [i for i, w in enumerate(WRITES, 1) if w.startswith("bind default/a-")]
    first = scheduler_on(Faulty(cluster, binds[2]))
    with pytest.raises(Killed):
        first.start()
        quiesce(first)
    bound_nodes = {n for n in bound(cluster, "a").values() if n}
    missing = sorted(restarted_record_nodes(cluster) - bound_nodes)
    assert missing, "the record holds a node no member runs on yet"
    return bound_nodes, missing


def _assert_bound_members_kept_and_the_rest_released(
    cluster: FakeCluster, restarted: Scheduler, before: dict[str, str],
) -> None:
    after = bound(cluster, "a")
    assert set(after) == set(before), "no member of a was deleted"
    for name, node_name in before.items():
        if node_name:
            assert after[name] == node_name, f"{name} keeps running on {node_name}"
    held = restarted.records.held[("podgroups", "default", "a")]
    assert {name for name, n in before.items() if n} <= {p for r in held for p in r.pods}
    assert cluster.events(reason="HeldFromPod", involved_name="a-0")
    unbound = [name for name, n in before.items() if not n]
    assert all(cluster.events(reason="RecordReleased", involved_name=name) for name in unbound)
    assert not cluster.events(reason="GangReleased")


def test_a_recorded_node_gone_keeps_the_bound_members_and_releases_only_the_unbound() -> None:
    cluster = populated()
    _, missing = _cut_gang_a(cluster)
    before = bound(cluster, "a")
    cluster.delete(NODES, missing[0])
    restarted = scheduler_on(cluster)
    restarted.start()
    quiesce(restarted)
    check_invariants(cluster, restarted)
    _assert_bound_members_kept_and_the_rest_released(cluster, restarted, before)
    assert all(bound(cluster, "a").values()), "the released members are placed again"


def test_pods_placed_on_a_recorded_node_meanwhile_release_only_the_unbound_members() -> None:
    cluster = populated()
    _, missing = _cut_gang_a(cluster)
    before = bound(cluster, "a")
    cluster.create(PODS, pod("intruder", "3", scheduler="default-scheduler",
                             node_name=missing[0]), "default")
    restarted = scheduler_on(cluster)
    restarted.start()
    quiesce(restarted)
    check_invariants(cluster, restarted)
    _assert_bound_members_kept_and_the_rest_released(cluster, restarted, before)
    intruder = restarted.view.pins[("default", "intruder")]
    assert intruder.jobid in restarted.matcher.allocations(), "the intruder counts where it runs"


def restarted_record_nodes(cluster: FakeCluster) -> set[str]:
    probe = scheduler_on(cluster)
    probe.read_only = True
    probe.records.read_only = True
    with probe.view.lock:
        for resource in (NODES, PODS, PODGROUPS):
            probe.view.replace(resource.plural, cluster.list(resource).items)
        probe._build()
    return {s.node for r in probe.records.held[("podgroups", "default", "a")]
            for a in r.allocations.values() for s in a.nodes}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, dict[str, list[str]], int, int]:
    """Nodes of 4 cores, gangs of 1- and 2-core pods, and two kill points (0: no second kill)."""
    node_count = draw(st.integers(2, 4))
    gangs = {
        f"g{i}": draw(st.lists(st.sampled_from(["1", "2"]), min_size=2, max_size=5))
        for i in range(draw(st.integers(1, 4)))
    }
    return node_count, gangs, draw(st.integers(1, 25)), draw(st.integers(0, 12))


@settings(max_examples=100, deadline=None)
@given(case=scenarios())
def test_random_gangs_killed_twice_at_random_writes_end_whole(case) -> None:  # type: ignore[no-untyped-def]
    node_count, gangs, first_kill, second_kill = case
    cluster = FakeCluster()
    for i in range(node_count):
        cluster.create(NODES, node(f"n{i}", cpu=4))
    for gang, cpus in gangs.items():
        cluster.create(PODGROUPS, pod_group(gang, len(cpus)), "default")
        for i, cpu in enumerate(cpus):
            cluster.create(PODS, pod(f"{gang}-{i}", cpu, group=gang), "default")
    died = run_until_killed(scheduler_on(Faulty(cluster, first_kill)))
    event(f"first kill {'landed' if died else 'after the last write'}")
    if second_kill:
        run_until_killed(scheduler_on(Faulty(cluster, second_kill)))
    final = scheduler_on(cluster)
    final.start()
    quiesce(final)
    check_invariants(cluster, final)
    for gang in gangs:  # finish every whole gang in turn: the rest must follow, whole
        finish_bound(cluster, gang, len(gangs[gang]))
        quiesce(final)
        check_invariants(cluster, final)


def finish_bound(cluster: FakeCluster, gang: str, size: int) -> None:
    for i in range(size):
        member = cluster.get(PODS, f"{gang}-{i}", "default")
        if member is not None and g.is_bound(member):
            cluster.patch_status(PODS, f"{gang}-{i}", {"status": {"phase": "Succeeded"}},
                                 "default")
