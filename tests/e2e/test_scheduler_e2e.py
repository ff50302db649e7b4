"""The scheduler against a real kube-apiserver (skipped without KUBEBUILDER_ASSETS).

Each test runs ``Scheduler.run`` in a thread, exactly as ``fluence up`` does,
and watches what it did through the API. Nodes are hand-made (no kubelet) and
labelled with the test's namespace; every pod selects that label, so tests
never see each other's nodes. Pods are finished by writing their phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import Settings, load_settings
from fluence_core.testing import make_node_dict, make_pod_dict, make_pod_group_dict
from fluence_core.testing_apiserver import scheduler_beside, wait_for

pytestmark = pytest.mark.e2e


class Run:
    """A scheduler thread plus helpers scoped to one namespace."""

    def __init__(self, kube: KubeCluster, namespace: str) -> None:
        self.kube = kube
        self.ns = namespace
        self.nodes: list[str] = []
        self._running = ExitStack()
        self.scheduler: Scheduler | None = None

    def start_scheduler(self, settings: Settings | None = None) -> Scheduler:
        """Fluence's scheduler with ``settings`` (the defaults when None), in place of the
        one running."""
        self.stop_scheduler()
        running = self._running.enter_context(
            scheduler_beside(self.kube, settings or load_settings()))
        self.scheduler = running.scheduler
        return running.scheduler

    def stop_scheduler(self) -> None:
        self._running.close()

    def node(self, suffix: str, cpu: int = 4) -> str:
        name = f"{self.ns}-{suffix}"
        self.kube.create("nodes", make_node_dict(name, cpu, labels={"e2e-ns": self.ns},
                                                 capacity=True))
        self.nodes.append(name)
        return name

    def pod(self, name: str, cpu: str = "1", group: str | None = None, **extra: Any) -> None:
        """A Fluence pod kept to this namespace's nodes; ``extra`` is set over its spec."""
        self.kube.create("pods", make_pod_dict(name, cpu, namespace=self.ns, group=group,
                                               nodeSelector={"e2e-ns": self.ns}, **extra),
                         self.ns)

    def gang(self, name: str, size: int, cpu: str = "1",
             constraints: dict[str, Any] | None = None) -> None:
        """A PodGroup of ``size`` (``spec.schedulingConstraints`` when given) and its pods."""
        group = make_pod_group_dict(name, size, self.ns)
        if constraints:
            group["spec"]["schedulingConstraints"] = constraints
        self.kube.create("podgroups", group, self.ns)
        for i in range(size):
            self.pod(f"{name}-{i}", cpu, group=name)

    def node_of(self, pod: str) -> str | None:
        found = self.kube.get("pods", pod, self.ns)
        return None if found is None else found["spec"].get("nodeName")

    def wait(self, check: Callable[[], bool], what: str, timeout: float = 30) -> None:
        wait_for(check, what, timeout, every=0.2)

    def group_condition(self, group: str, kind: str = "PodGroupScheduled") -> str | None:
        """The status of the PodGroup's condition ``kind``, None while it has none."""
        found = self.kube.get("podgroups", group, self.ns) or {}
        conditions = (found.get("status") or {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == kind), None)

    def finish(self, pod: str) -> None:
        self.kube.patch_status("pods", pod, {"status": {"phase": "Succeeded"}}, self.ns)

    def events(self, pod: str, reason: str) -> list[dict[str, Any]]:
        items = self.kube.list("events", self.ns, field_selector=f"involvedObject.name={pod}").items
        return [e for e in items if e.get("reason") == reason]


@contextmanager
def running(harness: Run) -> Iterator[Run]:
    """``harness``, its scheduler stopped and its nodes deleted at the end."""
    try:
        yield harness
    finally:
        harness.stop_scheduler()
        for node in harness.nodes:
            harness.kube.delete("nodes", node)


@pytest.fixture
def run(kube: KubeCluster, kube_namespace: str) -> Iterator[Run]:
    with running(Run(kube, kube_namespace)) as harness:
        yield harness


def test_a_single_pod_is_bound_with_an_event(run: Run) -> None:
    node = run.node("n0")
    run.start_scheduler()
    run.pod("solo", "2")
    run.wait(lambda: run.node_of("solo") == node, "solo to be bound")
    run.wait(lambda: bool(run.events("solo", "Scheduled")), "a Scheduled event")


def test_a_gang_is_placed_whole(run: Run) -> None:
    run.node("n0")
    run.node("n1")
    run.start_scheduler()
    run.gang("g", 4, "2")
    run.wait(lambda: all(run.node_of(f"g-{i}") for i in range(4)), "the whole gang bound")
    # The record is written before the first bind; the condition after the last, so the pods
    # can show their nodes before the PodGroup shows it (it read as a KeyError under load).
    group = run.kube.get("podgroups", "g", run.ns)
    assert names.JOBIDS_ANNOTATION in group["metadata"]["annotations"]
    run.wait(lambda: run.group_condition("g") == "True", "PodGroupScheduled=True on g")


def test_contending_gangs_one_whole_one_waiting_then_freed(run: Run) -> None:
    run.node("n0")
    run.node("n1")
    run.start_scheduler()
    run.gang("a", 2, "4")
    run.wait(lambda: all(run.node_of(f"a-{i}") for i in range(2)), "gang a bound")
    run.gang("b", 2, "4")
    run.wait(lambda: bool(run.events("b-0", "FailedScheduling")), "gang b told why it waits")
    assert not any(run.node_of(f"b-{i}") for i in range(2)), "gang b must not run partially"
    run.kube.delete(
        "pods", "a-0", run.ns, grace_period_seconds=0
    )  # no kubelet to confirm a graceful one
    run.finish("a-1")
    run.wait(lambda: all(run.node_of(f"b-{i}") for i in range(2)), "gang b bound after a finished")


def test_a_restart_mid_run_never_double_allocates(run: Run) -> None:
    run.node("n0")
    run.start_scheduler()
    run.pod("first", "4")
    run.wait(lambda: run.node_of("first") is not None, "first bound")
    run.stop_scheduler()
    run.pod("second", "4")
    scheduler = run.start_scheduler()
    assert len(scheduler.matcher.allocations()) >= 1
    time.sleep(2)
    assert run.node_of("second") is None, "the restarted scheduler forgot what first holds"
    run.finish("first")
    run.wait(lambda: run.node_of("second") is not None, "second bound once first finished")


def test_a_node_cordoned_mid_run_takes_no_new_pods(run: Run) -> None:
    n0 = run.node("n0")
    n1 = run.node("n1")
    run.start_scheduler()
    run.kube.patch("nodes", n0, {"spec": {"unschedulable": True}})
    time.sleep(1.5)
    run.pod("p0", "4")
    run.wait(lambda: run.node_of("p0") == n1, "p0 on the uncordoned node")
    run.pod("p1", "4")
    time.sleep(2)
    assert run.node_of("p1") is None
    run.kube.patch("nodes", n0, {"spec": {"unschedulable": False}})
    run.wait(lambda: run.node_of("p1") == n0, "p1 once n0 is uncordoned")
