"""fluence_core.scheduler.binder: binding a committed group, or giving it all back."""

from __future__ import annotations

import threading
import time
from typing import Any

from fluence_core import hookimpl, names
from fluence_core.kube.api import PODGROUPS, PODS
from fluence_core.kube.errors import Conflict
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.plugins import get_plugin_manager
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.binder import Binder, Commit, Reporter
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.records import HeldPlacement
from fluence_core.scheduler.view import ClusterView
from fluence_core.settings import load_settings
from tests.scheduler.conftest import node, pod, pod_group
from tests.scheduler.parts import cluster_of, started_view


class _Unreserve:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def fluence_unreserve(self, group: Any, placements: Any, ctx: SchedulingContext) -> None:
        self.calls.append(group.name)


def _binder(view: ClusterView, workers: int = 0, *plugins: object) -> Binder:
    cluster = view.records.cluster
    settings = load_settings()
    manager = get_plugin_manager(settings, extra_plugins=[(f"p{i}", p) for i, p in
                                                          enumerate(plugins)])
    reporter = Reporter(cluster, SchedulerMetrics(), clock=lambda: 0.0)
    return Binder(cluster, view, view.records, manager, reporter, workers)


def _commit(view: ClusterView, name: str = "solo") -> Commit:
    pending = g.pending_groups(view.unplaced.values(), view.pod_groups)[0]
    group = pending.requests()
    match = match_group(group, view.graph, view.matcher)
    assert isinstance(match, GroupMatch)
    owner = g.record_owner(pending)
    record = HeldPlacement(*owner, [g.pod_key(p)[1] for p in pending.pods], dict(match.allocations))
    view.records.held.setdefault(owner, []).append(record)
    ctx = SchedulingContext(settings=load_settings(), graph=view.graph, matcher=view.matcher,
                            cluster=view.records.cluster)
    return Commit(pending, group, match, owner, record, {"note": name}, ctx)


def test_a_bound_gang_has_its_record_written_its_pods_bound_and_told() -> None:
    members = [pod(f"w{i}", "2", group="gang") for i in range(2)]
    cluster = cluster_of(node("n0"), pod_group("gang", 2), *members)
    view = started_view(cluster)
    result = _binder(view).bind(_commit(view, "gang"))
    assert result.placed == {"default/w0": "n0", "default/w1": "n0"}
    group = cluster.get(PODGROUPS, "gang", "default")["metadata"]["annotations"]
    assert group["note"] == "gang" and group[names.JOBIDS_ANNOTATION] == "1"
    for name in ("w0", "w1"):
        assert cluster.get(PODS, name, "default")["spec"]["nodeName"] == "n0"
        assert cluster.events(reason="Scheduled", involved_name=name)
    assert view.pods_on("n0") == 2 and not view.unplaced


def test_a_lone_pod_gets_what_prebind_gave_and_no_record() -> None:
    cluster = cluster_of(node("n0"), pod("solo", "2"))
    view = started_view(cluster)
    _binder(view).bind(_commit(view))
    stored = cluster.get(PODS, "solo", "default")
    assert stored["spec"]["nodeName"] == "n0"
    assert stored["metadata"]["annotations"]["note"] == "solo"
    assert names.JOBIDS_ANNOTATION not in stored["metadata"]["annotations"]


def test_a_lone_pod_with_nothing_to_record_is_only_bound() -> None:
    cluster = cluster_of(node("n0"), pod("solo", "2"))
    view = started_view(cluster)
    patched: list[str] = []
    real_patch = cluster.patch

    def patch(resource: Any, name: str, body: Any, namespace: str | None = None,
              **options: Any) -> Any:
        patched.append(name)
        return real_patch(resource, name, body, namespace, **options)

    cluster.patch = patch  # type: ignore[method-assign]
    commit = _commit(view)
    commit.extra = {}
    assert _binder(view).bind(commit).placed == {"default/solo": "n0"}
    assert patched == []


def test_a_failed_bind_unreserves_cancels_and_drops_the_record() -> None:
    cluster = cluster_of(node("n0"), pod("solo", "2"))
    view = started_view(cluster)
    unreserve = _Unreserve()
    binder = _binder(view, 0, unreserve)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise Conflict(409, "simulated refusal", "Conflict")

    cluster.bind = refuse  # type: ignore[method-assign]
    result = binder.bind(_commit(view))
    assert "binding failed" in (result.reason or "")
    assert unreserve.calls == ["default/solo"]
    assert dict(view.matcher.allocations()) == {}
    assert view.records.held[("pods", "default", "solo")] == []
    # a refused bind is the API's trouble: tried again after the backoff, moved view or not
    assert "default/solo" not in binder.reporter.failed_at
    assert not binder.reporter.unschedulable.at(view.generation)


def test_a_member_bound_before_the_failure_is_pinned_where_it_runs() -> None:
    members = [pod(f"w{i}", "2", group="gang") for i in range(2)]
    cluster = cluster_of(node("n0"), pod_group("gang", 2), *members)
    view = started_view(cluster)
    real_bind = cluster.bind

    def second_fails(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        if name == "w1":
            raise Conflict(409, "simulated refusal", "Conflict")
        real_bind(namespace, name, node_name, uid=uid)

    cluster.bind = second_fails  # type: ignore[method-assign]
    _binder(view).bind(_commit(view))
    assert list(view.pins) == [("default", "w0")]
    held = view.matcher.allocations()
    assert list(held) == [view.pins[("default", "w0")].jobid]


def test_a_pooled_binding_binds_while_the_cycle_holds_the_lock_and_settles_after() -> None:
    cluster = cluster_of(node("n0"), pod("solo", "2"))
    view = started_view(cluster)
    binder = _binder(view, 1)
    with view.lock:  # as a cycle over a backlog holds it
        result = binder.bind(_commit(view))
        assert result.placed == {"default/solo": "n0"}
        deadline = time.monotonic() + 10
        while not cluster.get(PODS, "solo", "default")["spec"].get("nodeName"):
            assert time.monotonic() < deadline, "the binding waited for the view's lock"
            time.sleep(0.01)
        assert ("default", "solo") in binder.in_flight, "in flight until settled"
        assert binder.busy(("pods", "default", "solo"))
    binder.drain(timeout=10)
    with view.lock:
        assert binder.in_flight == set() and not binder.busy(("pods", "default", "solo"))
        assert view.pods_on("n0") == 1 and not view.unplaced


def test_a_pooled_binding_wakes_the_loop_when_it_finishes() -> None:
    cluster = cluster_of(node("n0"), pod("solo", "2"))
    view = started_view(cluster)
    binder = _binder(view, 1)
    woken = threading.Event()
    binder.wake = woken.set
    with view.lock:
        binder.bind(_commit(view))
    assert woken.wait(10)


def test_a_failed_pooled_binding_is_given_back_when_settled() -> None:
    cluster = cluster_of(node("n0"), pod("solo", "2"))
    view = started_view(cluster)
    unreserve = _Unreserve()
    binder = _binder(view, 1, unreserve)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise Conflict(409, "simulated refusal", "Conflict")

    cluster.bind = refuse  # type: ignore[method-assign]
    with view.lock:
        binder.bind(_commit(view))
    binder.drain(timeout=10)
    assert unreserve.calls == ["default/solo"]
    assert dict(view.matcher.allocations()) == {}
    assert view.records.held[("pods", "default", "solo")] == []
    assert binder.in_flight == set() and ("default", "solo") in view.unplaced
    assert view.pods_on("n0") == 0


def test_the_reporter_tells_each_new_reason_once() -> None:
    cluster = cluster_of(pod("p"))
    reporter = Reporter(cluster, SchedulerMetrics(), clock=lambda: 0.0)
    pending = g.pending_groups([cluster.get(PODS, "p", "default")], {})[0]
    reporter.fail(pending, "too big", "unschedulable", 3)
    reporter.fail(pending, "too big", "unschedulable", 4)
    assert len(cluster.events(reason="FailedScheduling", involved_name="p")) == 1
    assert reporter.failed_at["default/p"] == 4
    reporter.fail(pending, "still too big", "unschedulable", 5)
    assert len(cluster.events(reason="FailedScheduling", involved_name="p")) == 2
    condition = cluster.get(PODS, "p", "default")["status"]["conditions"][0]
    assert condition["message"] == "still too big"


def test_the_reporter_forgets_failures_of_a_scheduled_group() -> None:
    cluster = cluster_of(pod("p"))
    metrics = SchedulerMetrics()
    times = iter([1.0, 3.5, 3.5])
    reporter = Reporter(cluster, metrics, clock=lambda: next(times))
    pending = g.pending_groups([cluster.get(PODS, "p", "default")], {})[0]
    reporter.seen(pending.key)
    reporter.fail(pending, "too big", "unschedulable", 1)
    reporter.scheduled(pending, {"default/p": "n0"})
    assert "default/p" not in reporter.failed_at
    assert metrics.registry.get_sample_value("fluence_group_e2e_seconds_sum") == 2.5
