"""A group that failed waits out kube-scheduler's backoff before it is tried again.

``podInitialBackoffSeconds`` (1) doubled at each failed attempt, at most
``podMaxBackoffSeconds`` (10); and, as before, only once something changed.
"""

from __future__ import annotations

from typing import Callable

from fluence_core.kube.api import PODS
from fluence_core.scheduler.backoff import Backoff, Unschedulable
from fluence_core.testing import ManualClock
from tests.scheduler.conftest import Harness, node, pod, pod_group

Factory = Callable[..., Harness]




def test_each_failure_doubles_the_wait_up_to_the_maximum() -> None:
    backoff = Backoff(ManualClock(), initial=1.0, maximum=10.0)
    assert [backoff.failed("g") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_group_is_ready_once_its_wait_is_over() -> None:
    clock = ManualClock()
    backoff = Backoff(clock)
    assert backoff.ready("g"), "a group that never failed does not wait"
    backoff.failed("g")
    assert not backoff.ready("g") and backoff.next_expiry() == 101.0
    clock.now = 101.0
    assert backoff.ready("g") and backoff.next_expiry() is None


def test_a_placed_group_starts_again_from_the_initial_wait() -> None:
    backoff = Backoff(ManualClock())
    backoff.failed("g")
    backoff.failed("g")
    backoff.forget("g")
    assert backoff.failed("g") == 1.0


def test_only_pending_groups_are_remembered() -> None:
    backoff = Backoff(ManualClock())
    for key in ("a", "b", "c"):
        backoff.failed(key)
    backoff.keep_only({"b"})
    assert len(backoff) == 1 and not backoff.ready("b") and backoff.ready("a")


def test_an_initial_wait_of_zero_turns_backoff_off() -> None:
    backoff = Backoff(ManualClock(), initial=0.0)
    assert backoff.failed("g") == 0.0 and backoff.ready("g") and backoff.next_expiry() is None


def test_a_change_within_the_backoff_does_not_bring_the_group_back(
        harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod("big", "4"))
    assert len(h.cycle()) == 1  # fails: waits 1 s
    h.add(node("n1", cpu=2))
    assert h.cycle(after=0.5) == [], "the view changed, but the backoff runs 1 s"
    assert len(h.cycle(after=0.5)) == 1  # 1 s after: tried again, fails again (waits 2 s)
    h.add(node("n2", cpu=8))
    assert h.cycle(after=1.5) == []
    assert h.cycle(after=0.5)[0].placed == {"default/big": "n2"}


def test_without_a_change_an_expired_backoff_brings_nothing_back(
        harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod("big", "4"))
    h.cycle()
    assert h.cycle() == [], "the backoff is over but nothing changed"


def test_the_scheduler_wakes_when_the_first_backoff_expires(harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod("big", "4"), pod("huge", "8"))
    h.cycle()
    assert h.scheduler.next_wakeup() == h.now + 1.0
    assert h.scheduler._wait(5.0) == 1.0
    h.now += 0.75
    assert h.scheduler._wait(5.0) == 0.25


def test_an_unfittable_backlog_is_tried_once_per_backoff_not_once_per_change(
        harness_factory: Factory) -> None:
    backlog = [pod(f"big{i}", "4") for i in range(20)]
    h = harness_factory(node("n0", cpu=2), *backlog)
    h.cycle()
    attempts = 0
    for i in range(30):  # a small pod arrives every 100 ms for 3 s: a change each cycle
        h.add(pod(f"small{i}", "100m"))
        attempts += sum(1 for r in h.cycle(after=0.1) if r.group.startswith("default/big"))
        h.cluster.delete(PODS, f"small{i}", "default")
    # tried at 1 s and at 3 s after the first failure (waits of 1 s, then 2 s): 2 x 20
    assert attempts == 40, attempts


def test_the_unschedulable_pods_are_those_of_the_views_generation() -> None:
    pool = Unschedulable()
    pool.add(("a", "p"), 3)
    pool.add(("a", "q"), 3)
    pool.discard(("a", "q"))
    assert pool.at(3) == {("a", "p")}
    assert pool.at(4) == set(), "the view moved on: every pod is tried again"


def test_a_failure_at_a_newer_generation_starts_a_new_pool() -> None:
    pool = Unschedulable()
    pool.add(("a", "p"), 3)
    pool.add(("a", "q"), 4)
    assert pool.at(4) == {("a", "q")}


def test_a_lone_pod_that_failed_is_unschedulable_until_the_view_moves(
        harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod("big", "4"))
    h.cycle()
    generation = h.scheduler.view.generation
    assert h.scheduler.reporter.unschedulable.at(generation) == {("default", "big")}
    registry = h.scheduler.metrics.registry
    assert registry.get_sample_value("fluence_pending_groups") == 1, "still counted as pending"


def test_a_podgroup_member_that_failed_still_counts_toward_its_group(
        harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod_group("g", 1), pod("m0", "4", group="g"))
    h.cycle()
    assert h.scheduler.reporter.unschedulable.at(h.scheduler.view.generation) == set()


def test_an_unschedulable_pod_keeps_its_backoff_while_left_out(
        harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod("big", "4"))
    h.cycle()  # fails: waits 1 s
    h.cycle(after=0.5)  # left out of the cycle, its backoff remembered
    h.add(node("n1", cpu=2))  # the view moves; the pod is tried again after its backoff
    assert len(h.cycle(after=0.5)) == 1
    assert h.scheduler.next_wakeup() == h.now + 2.0, "its second failure doubled the wait"
