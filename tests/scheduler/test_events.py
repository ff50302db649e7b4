"""fluence_core.scheduler.events: events posted now, or off the hot path."""

from __future__ import annotations

import threading
from typing import Any

from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.scheduler.events import EventRecorder
from tests.scheduler.conftest import pod


def _pod(name: str) -> dict[str, Any]:
    """A pod as the API server returned it: an event names its uid and resourceVersion."""
    return pod(name, uid=f"uid-{name}", resource_version="1")


def test_by_default_an_event_is_posted_at_once() -> None:
    cluster = FakeCluster()
    EventRecorder(cluster).post(_pod("p"), "Normal", "Scheduled", "assigned")
    [event] = cluster.events(reason="Scheduled", involved_name="p")
    assert event["involvedObject"]["uid"] == "uid-p"


def test_in_the_background_events_arrive_in_order_once_flushed() -> None:
    cluster = FakeCluster()
    recorder = EventRecorder(cluster, background=True)
    for i in range(20):
        recorder.post(_pod(f"p{i}"), "Normal", "Scheduled", f"assigned {i}")
    assert recorder.flush(timeout=10)
    messages = [e["message"] for e in cluster.events(reason="Scheduled")]
    assert messages == [f"assigned {i}" for i in range(20)]


def test_the_event_names_the_object_as_it_was_when_posted() -> None:
    cluster = FakeCluster()
    gate = threading.Event()
    real_post = cluster.post_event

    def slow_post(*args: Any, **kwargs: Any) -> Any:
        gate.wait(10)
        return real_post(*args, **kwargs)

    cluster.post_event = slow_post  # type: ignore[method-assign]
    recorder = EventRecorder(cluster, background=True)
    obj = _pod("p")
    recorder.post(obj, "Normal", "Scheduled", "assigned")
    obj["metadata"]["resourceVersion"] = "2"
    gate.set()
    assert recorder.flush(timeout=10)
    [event] = cluster.events(reason="Scheduled")
    assert event["involvedObject"]["resourceVersion"] == "1"


def test_a_full_queue_drops_events_instead_of_waiting() -> None:
    cluster = FakeCluster()
    gate = threading.Event()
    started = threading.Event()
    real_post = cluster.post_event

    def stuck_post(*args: Any, **kwargs: Any) -> Any:
        started.set()
        gate.wait(10)
        return real_post(*args, **kwargs)

    cluster.post_event = stuck_post  # type: ignore[method-assign]
    recorder = EventRecorder(cluster, background=True, capacity=1)
    recorder.post(_pod("p0"), "Normal", "Scheduled", "taken by the thread")
    assert started.wait(10)
    recorder.post(_pod("p1"), "Normal", "Scheduled", "queued")
    recorder.post(_pod("p2"), "Normal", "Scheduled", "dropped")
    assert recorder.dropped == 1
    gate.set()
    assert recorder.flush(timeout=10)
    assert [e["message"] for e in cluster.events(reason="Scheduled")] == [
        "taken by the thread", "queued"]


def test_a_refused_event_does_not_stop_the_ones_after_it() -> None:
    cluster = FakeCluster()
    real_post = cluster.post_event

    def refuse_first(involved: Any, *args: Any, **kwargs: Any) -> Any:
        if involved["metadata"]["name"] == "p0":
            raise ApiError(403, "events are forbidden", "Forbidden")
        return real_post(involved, *args, **kwargs)

    cluster.post_event = refuse_first  # type: ignore[method-assign]
    recorder = EventRecorder(cluster, background=True)
    recorder.post(_pod("p0"), "Normal", "Scheduled", "refused")
    recorder.post(_pod("p1"), "Normal", "Scheduled", "posted")
    assert recorder.flush(timeout=10)
    assert [e["message"] for e in cluster.events(reason="Scheduled")] == ["posted"]


def test_flush_gives_up_at_its_timeout() -> None:
    cluster = FakeCluster()
    gate = threading.Event()
    cluster.post_event = lambda *args, **kwargs: gate.wait(10)  # type: ignore[method-assign]
    recorder = EventRecorder(cluster, background=True)
    recorder.post(_pod("p"), "Normal", "Scheduled", "slow")
    assert not recorder.flush(timeout=0.05)
    gate.set()
    assert recorder.flush(timeout=10)
