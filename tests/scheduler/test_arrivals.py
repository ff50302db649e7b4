"""A gang still arriving is told why it waits only once it has waited a while.

kube-scheduler holds such pods at PreEnqueue and writes nothing; Fluence tells them
once they are still incomplete after ``FLUENCE_ARRIVAL_REPORT_SECONDS`` (1 s), and
then at most that often (see ``fluence_core/scheduler/arrivals.py``).
"""

from __future__ import annotations

from typing import Any, Callable

from fluence_core.kube.api import PODGROUPS, PODS
from fluence_core.scheduler.arrivals import ArrivalReports
from fluence_core.testing import ManualClock
from tests.scheduler.conftest import Harness, node, pod, pod_group

Factory = Callable[..., Harness]




def test_a_changed_reason_is_held_until_the_quiet_period_is_over() -> None:
    clock = ManualClock()
    reports = ArrivalReports(clock, quiet=1.0)
    assert not reports.due("g", changed=True)
    assert reports.next_due() == 101.0
    clock.now = 100.5
    assert not reports.due("g", changed=True), "a newer count is held too"
    clock.now = 101.0
    assert reports.due("g", changed=True)
    assert reports.next_due() is None


def test_after_a_report_the_next_one_waits_another_quiet_period() -> None:
    clock = ManualClock()
    reports = ArrivalReports(clock, quiet=1.0)
    reports.due("g", changed=True)
    clock.now = 101.0
    assert reports.due("g", changed=True)
    clock.now = 101.5
    assert not reports.due("g", changed=True) and reports.next_due() == 102.0


def test_an_unchanged_reason_is_never_told_again_and_holds_nothing() -> None:
    clock = ManualClock()
    reports = ArrivalReports(clock, quiet=1.0)
    reports.due("g", changed=True)
    clock.now = 105.0
    assert not reports.due("g", changed=False)
    assert reports.next_due() is None


def test_a_quiet_period_of_zero_tells_every_change_at_once() -> None:
    reports = ArrivalReports(ManualClock(), quiet=0.0)
    assert reports.due("g", changed=True) and reports.due("g", changed=True)
    assert reports.next_due() is None


def test_a_group_forgotten_starts_a_quiet_period_of_its_own_when_it_waits_again() -> None:
    clock = ManualClock()
    reports = ArrivalReports(clock, quiet=1.0)
    reports.due("g", changed=True)
    clock.now = 110.0
    reports.forget("g")
    assert not reports.due("g", changed=True) and reports.next_due() == 111.0


def test_groups_no_longer_pending_are_dropped() -> None:
    reports = ArrivalReports(ManualClock(), quiet=1.0)
    reports.due("a", changed=True)
    reports.due("b", changed=True)
    reports.keep_only({"b"})
    assert reports.next_due() == 101.0
    reports.keep_only(set())
    assert reports.next_due() is None


def _told(h: Harness, name: str) -> list[dict[str, Any]]:
    return h.cluster.events(reason="FailedScheduling", involved_name=name)


def _conditions(h: Harness, name: str) -> list[dict[str, Any]]:
    return list((h.cluster.get(PODS, name, "default").get("status") or {}).get("conditions")
                or [])


def test_a_gang_complete_within_the_quiet_period_is_placed_without_a_word(
        harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod_group("gang", 3), pod("w0", group="gang"))
    h.cycle()
    h.add(pod("w1", group="gang"))
    h.cycle(after=0.3)
    h.add(pod("w2", group="gang"))
    h.cycle(after=0.3)
    assert [h.node_of(f"w{i}") for i in range(3)] == ["n0", "n0", "n0"]
    assert not any(_told(h, f"w{i}") for i in range(3))
    assert not any(c.get("reason") == "Unschedulable"
                   for i in range(3) for c in _conditions(h, f"w{i}"))
    group = h.cluster.get(PODGROUPS, "gang", "default")
    assert [c["status"] for c in group["status"]["conditions"]] == ["True"]


def test_a_gang_still_incomplete_after_the_quiet_period_is_told_its_newest_count(
        harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod_group("gang", 4), pod("w0", group="gang"))
    h.cycle()
    assert not _told(h, "w0")
    assert h.scheduler.next_wakeup() == h.now + 1.0, "the loop wakes when it is due"
    h.add(pod("w1", group="gang"))
    h.cycle(after=0.5)
    assert not _told(h, "w0") and not _told(h, "w1")
    h.cycle(after=0.5)
    assert ["2 of 4 members ready" in e["message"] for e in _told(h, "w0") + _told(h, "w1")] \
        == [True, True]
    assert _conditions(h, "w1")[0]["reason"] == "Unschedulable"
    group = h.cluster.get(PODGROUPS, "gang", "default")
    assert group["status"]["conditions"][0]["reason"] == "Unschedulable"
    h.add(pod("w2", group="gang"))
    h.cycle(after=0.5)
    assert len(_told(h, "w0")) == 1, "the next count waits another quiet period"
    h.cycle(after=0.5)
    assert "3 of 4 members ready" in _told(h, "w2")[-1]["message"]
    assert len(_told(h, "w0")) == 2
