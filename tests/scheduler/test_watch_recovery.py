"""The watches of ``fluence up`` while a long cycle holds the view (issue 31).

A cycle over a large backlog holds the view's lock for a long time. The watch
threads go on meanwhile: they must resume each watch call where they themselves
left off (not where the loop last applied), recover from a lost history with one
re-list, and keep what they delivered bounded by the objects, not the events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fluence_core.kube.api import (
    PODS, RESYNC, Cancellation, ObjectList, ResourceRef, WatchEvent,
)
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.scheduler.inbox import Inbox
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import scheduler_beside, wait_for
from tests.scheduler.conftest import node, pod


class CountingCluster(FakeCluster):
    """The in-memory cluster, counting the pod listings (a re-list after a 410 is one), the
    pod watch calls, and the pods those calls delivered: what the test waits on."""

    def __init__(self) -> None:
        super().__init__()
        self.pod_lists = 0
        self.pod_watches = 0
        self.pods_watched: set[str] = set()

    def list(self, resource: ResourceRef, namespace: str | None = None, *,
             label_selector: str | None = None,
             field_selector: str | None = None) -> ObjectList:
        if resource in ("pods", PODS):
            self.pod_lists += 1
        return super().list(resource, namespace, label_selector=label_selector,
                            field_selector=field_selector)

    def watch(self, resource: ResourceRef, namespace: str | None = None, *,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None,
              timeout: float | None = None,
              cancel: Cancellation | None = None) -> Iterator[WatchEvent]:
        events = super().watch(resource, namespace, resource_version=resource_version,
                               label_selector=label_selector, field_selector=field_selector,
                               timeout=timeout, cancel=cancel)
        if resource not in ("pods", PODS):
            return events
        self.pod_watches += 1
        return self._noting(events)

    def _noting(self, events: Iterator[WatchEvent]) -> Iterator[WatchEvent]:
        for event, obj in events:
            for item in obj["items"] if event == RESYNC else [obj]:
                self.pods_watched.add(str((item.get("metadata") or {}).get("name")))
            yield event, obj


def _bound(cluster: FakeCluster) -> int:
    return sum(1 for p in cluster.list(PODS, "default").items if p["spec"].get("nodeName"))


@contextmanager
def _looping(cluster: FakeCluster) -> Iterator[Scheduler]:
    """``fluence up``'s loop over ``cluster`` in a thread, with watch calls of 0.1 s, once it
    has bound a first pod (the watches run)."""
    with scheduler_beside(cluster, load_settings(watch_chunk=0.1), idle=0.05,
                          join_timeout=30, bind_workers=2) as running:
        cluster.create(PODS, pod("probe", "1"), "default")
        wait_for(lambda: _bound(cluster) == 1, "the probe pod to bind", timeout=30, every=0.02)
        yield running.scheduler


def test_a_lost_history_during_a_long_cycle_costs_one_relist_and_every_pod_is_placed() -> None:
    cluster = CountingCluster()
    cluster.create("nodes", node("n0", cpu=64))
    cluster.create("nodes", node("n1", cpu=64))
    with _looping(cluster) as scheduler:
        with scheduler.view.lock:  # a long cycle: the loop applies nothing meanwhile
            for i in range(40):
                cluster.create(PODS, pod(f"p{i}", "1"), "default")
            wait_for(lambda: {f"p{i}" for i in range(40)} <= cluster.pods_watched,
                     "the pod watch to deliver the 40 pods", timeout=30, every=0.02)
            cluster.compact()  # the server forgets the history
            lists_before, watches_before = cluster.pod_lists, cluster.pod_watches
            cluster.create(PODS, pod("late", "1"), "default")
            # five watch calls, each of which resumes somewhere (counted, not timed: a loaded
            # machine makes fewer calls in a second, and the test would prove less)
            wait_for(lambda: "late" in cluster.pods_watched
                     and cluster.pod_watches >= watches_before + 5,
                     "five pod watch calls after the compaction", timeout=30, every=0.02)
            relists = cluster.pod_lists - lists_before
        wait_for(lambda: _bound(cluster) == 42, "every pod to bind", timeout=30, every=0.02)
    assert relists <= 1, f"{relists} re-lists while the loop was busy: the watch did not resume"


def test_what_waits_for_a_busy_loop_grows_with_the_objects_not_the_events() -> None:
    cluster = FakeCluster()
    cluster.create("nodes", node("n0", cpu=64))
    with _looping(cluster) as scheduler:
        with scheduler.view.lock:
            for i in range(10):
                cluster.create(PODS, pod(f"p{i}", "1"), "default")
            for round in range(30):  # 300 changes of the same ten pods
                for i in range(10):
                    cluster.patch(PODS, f"p{i}", {"metadata": {"labels": {"r": str(round)}}},
                                  "default")
            wait_for(lambda: scheduler.inbox.coalesced >= 250,
                     "the watch to deliver the changes", timeout=30, every=0.02)
            waiting = len(scheduler.inbox)
        wait_for(lambda: _bound(cluster) == 11, "every pod to bind", timeout=30, every=0.02)
    assert waiting <= 11, f"{waiting} changes waited for ten pods"


def test_the_inbox_keeps_the_newest_state_of_each_object_in_order_of_change() -> None:
    inbox = Inbox()
    inbox.put("pods", "ADDED", pod("a", uid="u1", resource_version="1"))
    inbox.put("pods", "ADDED", pod("b", uid="u2", resource_version="2"))
    inbox.put("pods", "MODIFIED", pod("a", uid="u1", resource_version="3", node_name="n0"))
    taken = inbox.take(timeout=0)
    assert taken is not None
    assert [(e, o["metadata"]["name"], o["metadata"]["resourceVersion"]) for _, e, o in taken] \
        == [("ADDED", "b", "2"), ("MODIFIED", "a", "3")]
    assert inbox.take(timeout=0) is None


def test_a_pod_deleted_and_created_again_under_its_name_stays_two_changes() -> None:
    inbox = Inbox()
    inbox.put("pods", "DELETED", pod("a", uid="u1", resource_version="1"))
    inbox.put("pods", "ADDED", pod("a", uid="u2", resource_version="2"))
    taken = inbox.take(timeout=0) or []
    assert [(e, o["metadata"]["uid"]) for _, e, o in taken] == [("DELETED", "u1"), ("ADDED", "u2")]


def test_a_relist_replaces_the_changes_of_its_kind_and_comes_before_later_ones() -> None:
    inbox = Inbox()
    inbox.put("pods", "ADDED", pod("a", uid="u1", resource_version="1"))
    inbox.put("nodes", "ADDED", {"metadata": {"name": "n0", "uid": "n", "resourceVersion": "2"}})
    inbox.put("pods", RESYNC, {"kind": "List", "items": [], "metadata": {"resourceVersion": "3"}})
    inbox.put("pods", RESYNC, {"kind": "List", "items": [], "metadata": {"resourceVersion": "4"}})
    inbox.put("pods", "ADDED", pod("b", uid="u2", resource_version="5"))
    taken = inbox.take(timeout=0) or []
    assert [(p, e, o["metadata"]["resourceVersion"]) for p, e, o in taken] == [
        ("pods", RESYNC, "4"), ("nodes", "ADDED", "2"), ("pods", "ADDED", "5")]


def test_a_finished_binding_wakes_the_loop_with_nothing_to_apply() -> None:
    inbox = Inbox()
    threading.Timer(0.05, inbox.settle).start()
    assert inbox.take(timeout=5) == []
    assert inbox.take(timeout=0) is None


def test_an_object_without_a_name_is_never_merged_with_another() -> None:
    inbox = Inbox()
    inbox.put("pods", "ADDED", {"spec": {}})
    inbox.put("pods", "ADDED", {"metadata": "garbled"})
    assert len(inbox.take(timeout=0) or []) == 2


def test_a_lone_pod_that_finished_leaves_nothing_in_the_record_book() -> None:
    cluster = FakeCluster()
    cluster.create("nodes", node("n0", cpu=8))
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    for i in range(5):
        cluster.create(PODS, pod(f"p{i}", "1"), "default")
    scheduler.pump()
    scheduler.schedule_once()
    scheduler.pump()
    assert _bound(cluster) == 5
    for i in range(5):
        cluster.delete(PODS, f"p{i}", "default", grace_period_seconds=0)
    scheduler.pump()
    assert scheduler.records.held == {}


def test_pods_that_come_and_go_while_none_of_fluences_waits_are_not_kept(
        monkeypatch: Any) -> None:
    from fluence_core.scheduler import feasible

    monkeypatch.setattr(feasible, "CHANGES_KEPT", 10)
    cluster = FakeCluster()
    cluster.create("nodes", node("n0", cpu=8))
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    for i in range(50):
        cluster.create(PODS, pod(f"theirs{i}", "100m", scheduler="other", node_name="n0"),
                       "default")
        cluster.delete(PODS, f"theirs{i}", "default", grace_period_seconds=0)
        scheduler.pump()
        scheduler.schedule_once()
    assert len(scheduler.view.pod_changes) <= 10
