"""PodGroups are made after the answer by a bounded background writer (issue 20)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from webhook_helpers import admit, pod

from fluence_core.kube.errors import ApiError
from fluence_core.testing import wait_for
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.admission.review import AdmissionService
from fluence_core.webhook.controller.writer import BackgroundWriter, NotYet, Write, transient


class Flaky:
    """The cluster boundary whose PodGroup creates fail as scripted, then pass through."""

    def __init__(self, inner: Any, failures: list[ApiError] | None = None,
                 gate: threading.Event | None = None) -> None:
        self.inner = inner
        self.failures = list(failures or [])
        self.gate = gate
        self.creates = 0

    def __getattr__(self, verb: str) -> Any:
        return getattr(self.inner, verb)

    def create(self, resource: Any, body: Any, namespace: str | None = None) -> Any:
        if getattr(resource, "plural", resource) == "podgroups":
            if self.gate is not None:
                assert self.gate.wait(10), "the test never opened the gate"
            self.creates += 1
            if self.failures:
                raise self.failures.pop(0)
        return self.inner.create(resource, body, namespace)


def unavailable() -> ApiError:
    return ApiError(503, "etcd leader changed", "ServiceUnavailable")


def gang_service(settings, cluster, writer) -> AdmissionService:
    return AdmissionService(settings, [GangHandler()], cluster=cluster, writer=writer)


def podgroup(cluster, name: str = "g") -> Any:
    return cluster.get("podgroups", name, "default")


def test_the_answer_does_not_wait_for_the_podgroup(settings, cluster, writer):
    gate = threading.Event()
    flaky = Flaky(cluster, gate=gate)
    response, out = admit(gang_service(settings, flaky, writer), pod("g-0", group="g"))
    assert response["allowed"] and out["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    assert podgroup(cluster) is None and writer.pending() == 1
    gate.set()
    assert writer.flush(timeout=10)
    assert podgroup(cluster)["spec"]["schedulingPolicy"]["gang"] == {"minCount": 1}


def test_a_transient_failure_is_retried_with_backoff_until_the_podgroup_is_made(
        settings, cluster, writer, sleeps):
    flaky = Flaky(cluster, [unavailable(), ApiError(0, "connection refused", "ConnectionError")])
    admit(gang_service(settings, flaky, writer), pod("g-0", group="g"))
    assert writer.flush(timeout=10)
    assert flaky.creates == 3 and sleeps == [0.2, 0.4]
    assert podgroup(cluster) is not None and (writer.written, writer.failed) == (1, 0)


def test_a_permanent_failure_is_logged_naming_the_podgroup_and_not_retried(
        settings, cluster, writer, sleeps, caplog):
    forbidden = ApiError(403, 'podgroups.scheduling.k8s.io is forbidden', "Forbidden")
    flaky = Flaky(cluster, [forbidden])
    with caplog.at_level(logging.ERROR, logger="fluence"):
        response, _ = admit(gang_service(settings, flaky, writer), pod("g-0", group="g"))
        assert writer.flush(timeout=10)
    assert response["allowed"]  # the answer left before the write was tried
    assert flaky.creates == 1 and sleeps == [] and writer.failed == 1
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "PodGroup default/g of pod default/g-0 failed for good" in record.getMessage()
    assert "forbidden" in record.getMessage()
    assert podgroup(cluster) is None


def test_transient_failures_past_the_last_attempt_are_logged_with_the_count(caplog, sleeps):
    writer = BackgroundWriter(attempts=3, sleep=sleeps.append)
    failures = []

    def fail() -> None:
        failures.append(1)
        raise unavailable()

    with caplog.at_level(logging.ERROR, logger="fluence"):
        assert writer.submit(Write("k", "PodGroup ns/g", fail))
        assert writer.close(timeout=10)
    assert len(failures) == 3 and sleeps == [0.2, 0.4]
    assert any("PodGroup ns/g failed after 3 attempt(s)" in r.getMessage()
               for r in caplog.records if r.levelno == logging.ERROR)


def test_a_group_whose_write_failed_is_tried_again_by_a_later_sibling(settings, cluster, writer):
    flaky = Flaky(cluster, [ApiError(403, "forbidden", "Forbidden")])
    service = gang_service(settings, flaky, writer)
    admit(service, pod("g-0", group="g"))
    assert writer.flush(timeout=10) and podgroup(cluster) is None
    admit(service, pod("g-1", group="g"), uid="u2")
    assert writer.flush(timeout=10) and podgroup(cluster) is not None


def test_a_dry_run_submits_nothing(settings, cluster, writer):
    flaky = Flaky(cluster)
    response, out = admit(gang_service(settings, flaky, writer), pod("g-0", group="g"),
                          dry_run=True)
    assert response["allowed"] and out["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    assert writer.pending() == 0 and writer.flush(timeout=10)
    assert flaky.creates == 0 and podgroup(cluster) is None


def test_a_reinvocation_while_the_write_waits_queues_it_once(settings, cluster, writer):
    gate = threading.Event()
    flaky = Flaky(cluster, gate=gate)
    service = gang_service(settings, flaky, writer)
    _, first = admit(service, pod("g-0", group="g"))
    again, _ = admit(service, first, uid="req-1")  # the API server calls again with our output
    assert again["allowed"] and "patch" not in again
    admit(service, pod("g-1", group="g"), uid="u2")  # a sibling, while the write still waits
    assert writer.pending() == 1
    gate.set()
    assert writer.flush(timeout=10)
    assert flaky.creates == 1 and writer.written == 1


def test_a_full_queue_makes_the_podgroup_on_the_request_path(settings, cluster, sleeps, caplog):
    writer = BackgroundWriter(capacity=1, workers=1, sleep=sleeps.append)
    started, blocker = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        blocker.wait(10)

    assert writer.submit(Write("busy", "a slow write", slow))
    assert started.wait(10)  # the one worker is busy
    assert writer.submit(Write("queued", "a queued write", lambda: None))  # the one slot
    try:
        with caplog.at_level(logging.WARNING, logger="fluence"):
            service = gang_service(settings, cluster, writer)
            response, _ = admit(service, pod("g-0", group="g"))
            admit(service, pod("h-0", group="h"), uid="u2")
        assert response["allowed"]
        assert podgroup(cluster) is not None, "made before the answer, as without a writer"
        assert podgroup(cluster, "h") is not None
        full = [r for r in caplog.records if "background writes wait already" in r.getMessage()]
        assert len(full) == 1, "said once per time the queue fills, not once per request"
    finally:
        blocker.set()
        assert writer.close(timeout=10)


def test_close_makes_what_is_queued_then_refuses_more(sleeps):
    writer = BackgroundWriter(workers=1, sleep=sleeps.append)
    made: list[str] = []
    for key in ("a", "b", "c"):
        assert writer.submit(Write(key, key, lambda k=key: made.append(k)))
    assert writer.close(timeout=10)
    assert made == ["a", "b", "c"]
    assert not writer.submit(Write("d", "d", lambda: made.append("d")))


def test_only_no_answer_throttling_and_server_errors_are_transient():
    assert [transient(ApiError(s, "x")) for s in (0, 429, 500, 503)] == [True] * 4
    assert [transient(ApiError(s, "x")) for s in (400, 403, 404, 409, 422)] == [False] * 5
    assert not transient(RuntimeError("a bug"))


def test_a_writer_needs_room_threads_and_attempts():
    with pytest.raises(ValueError, match="capacity 0"):
        BackgroundWriter(capacity=0)


def test_a_step_saying_not_yet_is_tried_again_later_holding_no_thread(sleeps):
    writer = BackgroundWriter(workers=1, sleep=sleeps.append)
    ready = threading.Event()
    made: list[str] = []

    def when_ready() -> None:
        if not ready.is_set():
            raise NotYet("the Job is not stored yet")
        made.append("owned")
    assert writer.submit(Write("owned", "owned", when_ready, patience=10))
    assert writer.submit(Write("other", "other", lambda: made.append("other")))
    # the one thread makes the other meanwhile (waited on: a loaded machine may take a while)
    wait_for(lambda: made == ["other"], "the other write to be made", timeout=30, every=0.01)
    assert writer.flush(timeout=0.1) is False  # while 'owned' waits
    assert writer.holds("owned") and writer.pending() == 1
    ready.set()
    assert writer.flush(timeout=10)
    assert made == ["other", "owned"] and writer.written == 2 and writer.failed == 0
    assert sleeps == []  # no back-off sleep: it waited off the thread
    writer.close()


def test_a_step_not_ready_within_its_patience_is_dropped_and_logged(caplog):
    writer = BackgroundWriter()

    def never() -> None:
        raise NotYet("the Job is not stored yet")
    assert writer.submit(Write("k", "PodGroup default/g of Job g", never, patience=0.3))
    assert writer.flush(timeout=10)
    assert writer.failed == 1 and not writer.holds("k")
    assert "PodGroup default/g of Job g not made" in caplog.text
    writer.close()


def test_a_step_saying_not_yet_without_patience_fails_at_once(caplog):
    writer = BackgroundWriter()

    def never() -> None:
        raise NotYet("the Job is not stored yet")
    assert writer.submit(Write("k", "PodGroup default/g", never))
    assert writer.flush(timeout=10) and writer.failed == 1
    writer.close()
