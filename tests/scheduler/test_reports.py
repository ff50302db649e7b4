"""fluence_core.scheduler.reports: why a group waits, written behind the bindings."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from fluence_core.kube.api import PODS
from fluence_core.kube.errors import ApiError
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.reports import ReportWriter
from tests.scheduler.conftest import pod


def _cluster(*names: str) -> FakeCluster:
    cluster = FakeCluster()
    for name in names:
        cluster.create(PODS, pod(name), "default")
    return cluster


def _waiting(message: str) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable", "message": message}]}}


def _told(cluster: FakeCluster, name: str) -> str | None:
    """The message of the pod's PodScheduled condition, if it has one."""
    found = cluster.get(PODS, name, "default") or {}
    for condition in (found.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return str(condition.get("message"))
    return None


class Recorded:
    """Counts the writes the writer makes, and can hold them until released."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.written: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.writing = threading.Event()
        self._real = cluster.patch_status
        cluster.patch_status = self.patch_status  # type: ignore[method-assign]

    def patch_status(self, resource: Any, name: str, patch: Any, namespace: str | None = None
                     ) -> Any:
        self.writing.set()
        self.release.wait(10)
        self.written.append(name)
        return self._real(resource, name, patch, namespace)


class Busy:
    """A ``busy`` check that says yes until cleared, and counts how often it was asked."""

    def __init__(self) -> None:
        self.on = True
        self.asked = threading.Semaphore(0)

    def __call__(self) -> bool:
        self.asked.release()
        return self.on

    def wait_asked(self, times: int) -> None:
        for _ in range(times):
            assert self.asked.acquire(timeout=10), "the writer never asked whether binds wait"


def test_by_default_a_report_is_written_at_once() -> None:
    cluster = _cluster("p")
    ReportWriter(cluster).write("default/p", PODS, "default", "p", _waiting("no room"))
    assert _told(cluster, "p") == "no room"


def test_in_the_background_a_report_waits_while_bindings_are_in_flight() -> None:
    cluster = _cluster("p")
    writer = ReportWriter(cluster, background=True, patience=60)
    writer.busy = busy = Busy()
    writer.write("default/p", PODS, "default", "p", _waiting("no room"))
    busy.wait_asked(3)
    assert _told(cluster, "p") is None, "written while a binding was in flight"
    busy.on = False
    assert writer.flush(timeout=10)
    assert _told(cluster, "p") == "no room"


def test_a_report_waits_for_bindings_no_longer_than_its_patience() -> None:
    cluster = _cluster("p")
    writer = ReportWriter(cluster, background=True, patience=0.05)
    writer.busy = lambda: True
    writer.write("default/p", PODS, "default", "p", _waiting("no room"))
    assert writer.flush(timeout=10)
    assert _told(cluster, "p") == "no room"


def test_a_newer_report_on_an_object_replaces_the_one_queued() -> None:
    cluster = _cluster("p", "q")
    recorded = Recorded(cluster)
    writer = ReportWriter(cluster, background=True, patience=60)
    writer.busy = busy = Busy()
    writer.write("default/p", PODS, "default", "p", _waiting("first reason"))
    writer.write("default/q", PODS, "default", "q", _waiting("no room"))
    writer.write("default/p", PODS, "default", "p", _waiting("second reason"))
    busy.on = False
    assert writer.flush(timeout=10)
    assert recorded.written == ["p", "q"], "one write per object, in the order first queued"
    assert _told(cluster, "p") == "second reason"


def test_a_withdrawn_groups_reports_are_never_written() -> None:
    cluster = _cluster("a0", "a1", "b0")
    recorded = Recorded(cluster)
    writer = ReportWriter(cluster, background=True, patience=60)
    writer.busy = busy = Busy()
    for name in ("a0", "a1", "b0"):
        writer.write(f"default/{name[0]}", PODS, "default", name, _waiting("no room"))
    writer.withdraw("default/a")
    busy.on = False
    assert writer.flush(timeout=10)
    assert recorded.written == ["b0"]


def test_withdraw_waits_until_the_groups_report_being_written_is_done() -> None:
    cluster = _cluster("p")
    recorded = Recorded(cluster)
    recorded.release.clear()
    writer = ReportWriter(cluster, background=True)
    writer.write("default/p", PODS, "default", "p", _waiting("no room"))
    assert recorded.writing.wait(10)
    withdrawn = threading.Event()
    threading.Thread(target=lambda: (writer.withdraw("default/p"), withdrawn.set()),
                     daemon=True).start()
    assert not withdrawn.wait(0.2), "withdraw returned while the group's report was written"
    recorded.release.set()
    assert withdrawn.wait(10)
    assert _told(cluster, "p") == "no room"


def test_a_refused_report_does_not_stop_the_writer() -> None:
    cluster = _cluster("q")
    writer = ReportWriter(cluster, background=True)
    writer.write("default/gone", PODS, "default", "gone", _waiting("no room"))
    writer.write("default/q", PODS, "default", "q", _waiting("no room"))
    assert writer.flush(timeout=10)
    assert _told(cluster, "q") == "no room"


def test_an_unexpected_failure_does_not_stop_the_writer() -> None:
    cluster = _cluster("p", "q")
    real = cluster.patch_status

    def broken_for_p(resource: Any, name: str, patch: Any, namespace: str | None = None) -> Any:
        if name == "p":
            raise RuntimeError("simulated bug")
        return real(resource, name, patch, namespace)

    cluster.patch_status = broken_for_p  # type: ignore[method-assign]
    writer = ReportWriter(cluster, background=True)
    writer.write("default/p", PODS, "default", "p", _waiting("no room"))
    writer.write("default/q", PODS, "default", "q", _waiting("no room"))
    assert writer.flush(timeout=10)
    assert _told(cluster, "q") == "no room"


def test_without_the_background_a_refused_report_is_logged_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = _cluster("p")

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ApiError(429, "too many requests", "TooManyRequests")

    cluster.patch_status = refused  # type: ignore[method-assign]
    with caplog.at_level(logging.DEBUG, logger="fluence"):
        ReportWriter(cluster).write("default/p", PODS, "default", "p", _waiting("no room"))
    assert "cannot report on pods default/p" in caplog.text
