"""The binding cycle on a thread pool (``bind_workers``), as ``fluence up`` runs it."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from fluence_core.kube.api import PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import Conflict
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from tests.scheduler.conftest import node, pod, pod_group


def _cluster(*objects: dict) -> FakeCluster:
    cluster = FakeCluster()
    for obj in objects:
        kind = {"Node": "nodes", "Pod": "pods", "PodGroup": "podgroups"}[obj["kind"]]
        cluster.create(kind, obj, obj["metadata"].get("namespace"))
    return cluster


def _settle(scheduler: Scheduler) -> None:
    for _ in range(5):
        scheduler.pump()
        scheduler.schedule_once()
        scheduler.drain(timeout=10)
    scheduler.pump()


def test_asynchronous_binding_places_everything_once() -> None:
    members = [pod(f"g{i}", "2", group="g") for i in range(4)]
    singles = [pod(f"s{i}", "1") for i in range(8)]
    cluster = _cluster(node("n0", cpu=8), node("n1", cpu=8), pod_group("g", 4), *members, *singles)
    scheduler = Scheduler(cluster, load_settings(), bind_workers=4)
    scheduler.start()
    _settle(scheduler)
    bound = [p for p in cluster.list(PODS, "default").items if p["spec"].get("nodeName")]
    assert len(bound) == 12
    assert not [
        e for e in cluster.events(reason="FailedScheduling") if "binding failed" in e["message"]
    ]
    assert len(scheduler.matcher.allocations()) == 1 + 8


def test_a_failed_asynchronous_bind_gives_back_what_did_not_bind() -> None:
    members = [pod(f"g{i}", "4", group="g") for i in range(2)]
    cluster = _cluster(node("n0", cpu=4), node("n1", cpu=4), pod_group("g", 2), *members)
    real_bind = cluster.bind
    calls: list[str] = []
    lock = threading.Lock()

    def second_fails(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        with lock:
            calls.append(name)
            if len(calls) == 2:
                raise Conflict(409, "simulated refusal", "Conflict")
        real_bind(namespace, name, node_name, uid=uid)

    cluster.bind = second_fails  # type: ignore[method-assign]
    scheduler = Scheduler(cluster, load_settings(), bind_workers=2)
    scheduler.start()
    scheduler.schedule_once()
    scheduler.drain(timeout=10)
    scheduler.pump()
    first = calls[0]
    assert cluster.get(PODS, first, "default")["spec"]["nodeName"]
    held = list(scheduler.matcher.allocations().values())
    assert len(held) == 1, "only the pod that did bind still counts, as a pin"
    assert sum(len(s.cores) for s in held[0].nodes) == 4
    message = cluster.events(reason="FailedScheduling")[-1]["message"]
    assert "binding failed" in message


def test_a_stale_watch_event_never_makes_a_bound_pod_pending_again() -> None:
    cluster = _cluster(node("n0"), pod("p", "1"))
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    stale = copy.deepcopy(cluster.get(PODS, "p", "default"))
    assert scheduler.schedule_once()[0].placed == {"default/p": "n0"}
    scheduler.handle("pods", "MODIFIED", stale)  # an event older than the binding
    assert scheduler.schedule_once() == []
    scheduler.pump()
    assert len(scheduler.matcher.allocations()) == 1


def test_a_gangs_members_are_bound_side_by_side() -> None:
    members = [pod(f"g{i}", "1", group="g") for i in range(4)]
    cluster = _cluster(node("n0", cpu=8), pod_group("g", 4), *members)
    real_bind = cluster.bind
    together = threading.Barrier(4, timeout=10)

    def all_at_once(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        together.wait()  # breaks (and the bind fails) unless the four are in flight at once
        real_bind(namespace, name, node_name, uid=uid)

    cluster.bind = all_at_once  # type: ignore[method-assign]
    scheduler = Scheduler(cluster, load_settings(), bind_workers=4)
    scheduler.start()
    scheduler.schedule_once()
    scheduler.drain(timeout=30)
    scheduler.pump()
    assert [cluster.get(PODS, f"g{i}", "default")["spec"].get("nodeName") for i in range(4)] \
        == ["n0"] * 4
    assert not cluster.events(reason="FailedScheduling")


def test_a_member_that_fails_to_bind_stops_the_binds_not_yet_started() -> None:
    members = [pod(f"g{i}", "1", group="g") for i in range(6)]
    cluster = _cluster(node("n0", cpu=8), pod_group("g", 6), *members)
    calls: list[str] = []

    def refuse(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        calls.append(name)
        raise Conflict(409, "simulated refusal", "Conflict")

    cluster.bind = refuse  # type: ignore[method-assign]
    scheduler = Scheduler(cluster, load_settings(), bind_workers=1)
    scheduler.start()
    scheduler.schedule_once()
    scheduler.drain(timeout=30)
    assert calls == ["g0"], "one worker: the first refusal leaves the others unasked"
    assert not scheduler.matcher.allocations(), "nothing bound, nothing held"
    assert "binding failed" in cluster.events(reason="FailedScheduling")[-1]["message"]


def _told(cluster: FakeCluster, name: str) -> bool:
    """Whether the pod carries PodScheduled=False."""
    found = cluster.get(PODS, name, "default") or {}
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (found.get("status") or {}).get("conditions") or [])


def test_a_cycle_leaves_the_waiting_pods_reports_to_the_writer() -> None:
    cluster = _cluster(node("n0", cpu=2), *[pod(f"big{i}", "4") for i in range(20)])
    gate = threading.Event()
    real = cluster.patch_status

    def held(*args: Any, **kwargs: Any) -> Any:
        gate.wait(10)
        return real(*args, **kwargs)

    cluster.patch_status = held  # type: ignore[method-assign]
    scheduler = Scheduler(cluster, load_settings(), bind_workers=2)
    scheduler.start()
    done = threading.Event()
    threading.Thread(target=lambda: (scheduler.schedule_once(), done.set()), daemon=True).start()
    assert done.wait(5), "the cycle waited for the API to take its reports"
    gate.set()
    scheduler.drain(timeout=30)
    assert all(_told(cluster, f"big{i}") for i in range(20))


def test_a_new_pods_binding_goes_ahead_of_the_reports_still_queued() -> None:
    cluster = _cluster(node("n0", cpu=2), *[pod(f"big{i}", "4") for i in range(50)])
    writes: list[str] = []
    real_patch, real_bind = cluster.patch_status, cluster.bind

    def slow_report(resource: Any, name: str, patch: Any, namespace: str | None = None) -> Any:
        time.sleep(0.02)
        writes.append(f"report {name}")
        return real_patch(resource, name, patch, namespace)

    def bind(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        writes.append(f"bind {name}")
        real_bind(namespace, name, node_name, uid=uid)

    cluster.patch_status = slow_report  # type: ignore[method-assign]
    cluster.bind = bind  # type: ignore[method-assign]
    scheduler = Scheduler(cluster, load_settings(), bind_workers=2)
    scheduler.start()
    scheduler.schedule_once()
    cluster.create(PODS, pod("small", "1"), "default")
    scheduler.pump()
    scheduler.schedule_once()
    scheduler.drain(timeout=30)
    after = writes[writes.index("bind small"):]
    assert any(w.startswith("report ") for w in after), "the bind waited for every report"
    assert len([w for w in writes if w.startswith("report big")]) == 50
