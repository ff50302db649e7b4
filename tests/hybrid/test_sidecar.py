"""The sidecar in virtual time: a scripted vendor queue and the in-memory cluster."""

from __future__ import annotations

import json
import logging


from fluence_core import names
from fluence_core.runtime.fake_provider import (
    COMPLETED,
    FAILED,
    QUEUED,
    RUNNING,
    FakeQueueProvider,
    FakeTask,
)
from fluence_core.hybrid.release import ungate_patch
from fluence_core.hybrid.reporter import LocalReporter, ReportError
from fluence_core.hybrid.sidecar import Outcome, Sidecar

from .scouts import OTHER_GATE, annotations, config, finish, gates


def provider_with(clock, script, appear_at=0.0, session=None):  # type: ignore[no-untyped-def]
    task = FakeTask("job-42", script, appear_at=appear_at, session=session)
    return FakeQueueProvider(clock, {"scout-uid": task})


def test_workers_stay_gated_until_the_task_reaches_the_ungate_position(
    cluster, clock, tmp_path
) -> None:
    provider = provider_with(
        clock, [(0, 5, QUEUED), (30, 3, QUEUED), (60, 1, QUEUED), (90, None, RUNNING)]
    )
    gated_at = {}

    def watch(now: float) -> None:  # runs as each sleep ends, before the next poll
        gated_at[now] = names.QUANTUM_GATE in gates(cluster, "worker-2")
        if now >= 100:
            finish(cluster, "worker-1", "worker-2")

    clock.on_sleep = watch
    sidecar = Sidecar(cluster, provider, config(tmp_path), clock)
    result = sidecar.run()
    assert result.outcome is Outcome.READY and result.exit_code == 0
    assert sorted(result.ungated) == ["worker-1", "worker-2"]
    assert [p for _, p in result.series] == [5, 3, 1]
    assert result.series[-1][0] == 60  # ungated at the poll that saw position 1
    assert gated_at[10] and gated_at[50] and gated_at[60]  # still gated up to the poll at t=60
    assert not gated_at[70]
    assert result.workers_finished


def test_only_the_named_gate_is_removed_and_the_scout_id_stamped(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 1, QUEUED)], session="sess-7")
    finish(cluster, "worker-1", "worker-2")
    Sidecar(cluster, provider, config(tmp_path), clock).run()
    assert gates(cluster, "worker-1") == [OTHER_GATE]
    assert gates(cluster, "worker-2") == []
    assert gates(cluster, "stranger") == [names.QUANTUM_GATE]  # another group's pod
    stamped = annotations(cluster, "worker-1")
    assert stamped[names.SCOUT_JOB_ID_ANNOTATION] == "job-42"
    assert stamped[names.SCOUT_SESSION_ANNOTATION] == "sess-7"
    assert stamped[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_READY
    assert annotations(cluster, "scout")[names.SCOUT_JOB_ID_ANNOTATION] == "job-42"


def test_a_task_already_running_ungates_at_once(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, None, RUNNING)])
    finish(cluster, "worker-1", "worker-2")
    result = Sidecar(cluster, provider, config(tmp_path), clock).run()
    assert result.outcome is Outcome.READY and clock.now() == 0


def test_ungate_position_is_a_setting(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 9, QUEUED), (10, 4, QUEUED), (20, 2, QUEUED)])
    finish(cluster, "worker-1", "worker-2")
    result = Sidecar(cluster, provider, config(tmp_path, ungate_position=4), clock).run()
    assert result.series[-1] == (10, 4)


def test_beyond_2000_is_waited_through(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 2001, QUEUED), (3600, 1, QUEUED)])
    finish(cluster, "worker-1", "worker-2")
    result = Sidecar(cluster, provider, config(tmp_path), clock).run()
    assert [p for _, p in result.series] == [2001, 1]


def test_queue_position_changes_are_logged(cluster, clock, tmp_path, caplog) -> None:
    provider = provider_with(
        clock, [(0, 3, QUEUED), (10, 3, QUEUED), (20, 2, QUEUED), (30, 1, QUEUED)]
    )
    finish(cluster, "worker-1", "worker-2")
    with caplog.at_level(logging.INFO, logger="fluence"):
        Sidecar(cluster, provider, config(tmp_path), clock).run()
    changes = [r.getMessage() for r in caplog.records
               if r.getMessage().startswith("task job-42 queue position")]
    assert changes == ["task job-42 queue position ? -> 3", "task job-42 queue position 3 -> 2",
                       "task job-42 queue position 2 -> 1"]


def test_task_found_late_is_still_followed(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 1, QUEUED)], appear_at=35)
    finish(cluster, "worker-1", "worker-2")
    result = Sidecar(cluster, provider, config(tmp_path), clock).run()
    assert result.outcome is Outcome.READY and result.series[0][0] == 40


def test_task_not_found_in_time_fails_open_and_exits_non_zero(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 1, QUEUED)], appear_at=10_000)
    result = Sidecar(cluster, provider, config(tmp_path, find_timeout=60), clock).run()
    assert result.outcome is Outcome.NOT_FOUND and result.exit_code != 0
    assert clock.now() == 60
    assert gates(cluster, "worker-2") == []
    assert (
        annotations(cluster, "worker-2")[names.SCOUT_STATUS_ANNOTATION]
        == names.SCOUT_STATUS_NOT_FOUND
    )
    assert names.SCOUT_JOB_ID_ANNOTATION not in annotations(cluster, "worker-2")


def test_failed_task_ungates_with_no_result_and_exits_non_zero(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 4, QUEUED), (20, None, FAILED)])
    result = Sidecar(cluster, provider, config(tmp_path), clock).run()
    assert result.outcome is Outcome.NO_RESULT and result.exit_code == 1
    assert gates(cluster, "worker-1") == [OTHER_GATE] and gates(cluster, "worker-2") == []
    stamped = annotations(cluster, "worker-2")
    assert stamped[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_NO_RESULT
    assert stamped[names.SCOUT_JOB_ID_ANNOTATION] == "job-42"
    assert (tmp_path / "runtime" / names.RELEASE_MARKER_FILE).read_text().strip() == "no-result"


def test_observe_only_records_the_series_and_ungates_nothing(cluster, clock, tmp_path) -> None:
    provider = provider_with(
        clock, [(0, 7, QUEUED), (50, 2, QUEUED), (70, 1, QUEUED), (80, None, COMPLETED)]
    )
    result = Sidecar(cluster, provider, config(tmp_path, observe_only=True), clock).run()
    assert result.outcome is Outcome.OBSERVED and result.exit_code == 0
    assert result.series == [(0, 7), (50, 2), (70, 1), (80, None)]
    assert result.ungated == [] and gates(cluster, "worker-2") == [names.QUANTUM_GATE]
    recorded = [
        json.loads(line)
        for line in (tmp_path / "runtime" / "queue-series.jsonl").read_text().splitlines()
    ]
    assert [(r["t"], r["position"]) for r in recorded] == [(0, 7), (50, 2), (70, 1), (80, None)]


def test_waits_for_workers_then_releases_the_scout(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 1, QUEUED)])
    marker = tmp_path / "runtime" / names.RELEASE_MARKER_FILE
    seen = []

    def step(now: float) -> None:
        seen.append((now, marker.exists()))
        if now == 30:
            finish(cluster, "worker-1")
        if now == 50:
            finish(cluster, "worker-2", phase="Failed")

    clock.on_sleep = step
    result = Sidecar(cluster, provider, config(tmp_path), clock).run()
    assert result.workers_finished and clock.now() == 50
    assert not any(exists for _, exists in seen)
    assert marker.read_text().strip() == "ready"


def test_worker_timeout_bounds_the_wait(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 1, QUEUED)])
    result = Sidecar(cluster, provider, config(tmp_path, worker_timeout=120), clock).run()
    assert not result.workers_finished and clock.now() == 120
    assert (tmp_path / "runtime" / names.RELEASE_MARKER_FILE).exists()


def test_late_worker_is_ungated_while_waiting(cluster, clock, tmp_path) -> None:
    from .scouts import pod

    provider = provider_with(clock, [(0, 1, QUEUED)])

    def step(now: float) -> None:
        if now == 20:
            cluster.create(
                "pods", pod("worker-3", gates=[names.QUANTUM_GATE], role=names.ROLE_WORKER)
            )
        if now == 40:
            finish(cluster, "worker-1", "worker-2", "worker-3")

    clock.on_sleep = step
    result = Sidecar(cluster, provider, config(tmp_path), clock).run()
    assert "worker-3" in result.ungated and gates(cluster, "worker-3") == []
    assert annotations(cluster, "worker-3")[names.SCOUT_JOB_ID_ANNOTATION] == "job-42"


def test_transient_provider_errors_are_retried(cluster, clock, tmp_path) -> None:
    provider = provider_with(clock, [(0, 2, QUEUED), (20, 1, QUEUED)])
    original = provider.refresh
    failures = iter([True, False, True])

    def flaky(task):  # type: ignore[no-untyped-def]
        if next(failures, False):
            raise ConnectionError("vendor API hiccup")
        return original(task)

    provider.refresh = flaky  # type: ignore[method-assign]
    finish(cluster, "worker-1", "worker-2")
    assert Sidecar(cluster, provider, config(tmp_path), clock).run().outcome is Outcome.READY


def test_ungate_patch_pins_the_gate_index() -> None:
    pod = {"metadata": {"annotations": {"a": "b"}},
           "spec": {"schedulingGates": [{"name": OTHER_GATE}, {"name": names.QUANTUM_GATE}]}}
    ops = ungate_patch(pod, names.QUANTUM_GATE, {names.SCOUT_JOB_ID_ANNOTATION: "j"})
    assert ops == [
        {
            "op": "add",
            "path": "/metadata/annotations/fluence.flux-framework.org~1scout-job-id",
            "value": "j",
        },
        {"op": "test", "path": "/spec/schedulingGates/1/name", "value": names.QUANTUM_GATE},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]
    assert ungate_patch({"spec": {}}, names.QUANTUM_GATE, {}) is None


def test_workers_are_stamped_with_the_scouts_backend_and_attributes(
    cluster, clock, tmp_path
) -> None:
    chosen = {names.BACKEND_ANNOTATION: "sim_qpu", names.attr_annotation("provider"): "fake",
              names.attr_annotation("device-arn"): "arn:fake:device/sim"}
    cluster.patch("pods", "scout", {"metadata": {"annotations": chosen}}, "default")
    finish(cluster, "worker-1", "worker-2")
    Sidecar(cluster, provider_with(clock, [(0, 1, QUEUED)]), config(tmp_path), clock).run()
    for worker in ("worker-1", "worker-2"):
        stamped = annotations(cluster, worker)
        assert {k: stamped.get(k) for k in chosen} == chosen
    assert annotations(cluster, "stranger") == {}


class Flaky:
    """The in-process reporter behind an endpoint that is down for the first ``failures``
    release reports; notes every report."""

    def __init__(self, inner: LocalReporter, failures: int) -> None:
        self.inner, self.failures, self.seen = inner, failures, []

    def report(self, event, payload):  # type: ignore[no-untyped-def]
        self.seen.append((event, dict(payload)))
        if event == names.REPORT_RELEASE and self.failures:
            self.failures -= 1
            raise ReportError("endpoint down")
        return self.inner.report(event, payload)


def test_a_release_report_that_fails_is_sent_again_until_it_gets_through(
    cluster, clock, tmp_path
) -> None:
    flaky = Flaky(LocalReporter(cluster, "default", "scout", names.QUANTUM_GATE), failures=3)
    finish(cluster, "worker-1", "worker-2")
    provider = provider_with(clock, [(0, 2, QUEUED), (10, 1, QUEUED)], session="s-1")
    result = Sidecar(flaky, provider, config(tmp_path), clock).run()
    assert result.outcome is Outcome.READY and sorted(result.ungated) == ["worker-1", "worker-2"]
    assert gates(cluster, "worker-2") == []
    events = [event for event, _ in flaky.seen]
    assert events == ["found"] + ["release"] * 5 + ["final"]  # 3 failed, 1 released, 1 waited
    assert clock.now() == 10 + 3 * 10  # one poll interval between tries
    found = flaky.seen[0][1]
    assert (found["jobId"], found["position"]) == ("job-42", 2)
    final = flaky.seen[-1][1]
    assert (final["status"], final["workersFinished"]) == ("ready", True)


def test_the_sidecar_needs_no_cluster_only_a_reporter(clock, tmp_path) -> None:
    told: list[tuple[str, dict]] = []

    class Recorder:
        def report(self, event, payload):  # type: ignore[no-untyped-def]
            told.append((event, dict(payload)))
            return {"ok": True, "ungated": ["w-1"] if event == "release" and len(told) < 3
                    else [], "running": []}

    result = Sidecar(Recorder(), provider_with(clock, [(0, 1, QUEUED)]), config(tmp_path),
                     clock).run()
    assert result.outcome is Outcome.READY and result.ungated == ["w-1"]
    assert [e for e, _ in told] == ["found", "release", "release", "final"]
    assert told[1][1] == {"event": "release", "status": "ready", "jobId": "job-42"}
