"""The baselines' mechanics: first-fit splits gangs; an ungated gang idles its workers."""

from __future__ import annotations

from typing import Any

from fluence_core import names
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.sim.baseline import DEFAULT_SCHEDULER, FirstFitScheduler
from fluence_core.sim.scenario import QuantumSpec, Scenario
from fluence_core.sim.world import JobPlan, Run
from fluence_core.testing import make_node_dict, make_pod_dict, make_pod_group_dict


def _member(name: str, scheduler: str, group: str | None = None) -> dict[str, Any]:
    return make_pod_dict(name, "3", "1Gi", scheduler=scheduler, group=group,
                         labels={names.GROUP_LABEL: "gang"})


def _bound(cluster: FakeCluster) -> list[str]:
    return sorted(
        p["metadata"]["name"] for p in cluster.list(PODS).items if p["spec"].get("nodeName")
    )


def test_first_fit_binds_the_members_that_fit_and_leaves_the_gang_partial() -> None:
    cluster = FakeCluster()
    for name in ("n1", "n2"):
        cluster.create(NODES, make_node_dict(name, 4, "16Gi", pods=None))
    for i in range(3):
        cluster.create(PODS, _member(f"m{i}", DEFAULT_SCHEDULER))
    scheduler = FirstFitScheduler(cluster, clock=lambda: 0.0)
    scheduler.start()
    assert scheduler.schedule_once() == {"default/m0": "n1", "default/m1": "n2"}
    assert _bound(cluster) == ["m0", "m1"]
    assert scheduler.next_wakeup() == 1.0  # the third backs off 1 s, as kube-scheduler's does


def test_fluence_places_the_same_gang_all_or_nothing() -> None:
    cluster = FakeCluster()
    for name in ("n1", "n2"):
        cluster.create(NODES, make_node_dict(name, 4, "16Gi", pods=None))
    cluster.create(PODGROUPS, make_pod_group_dict("gang", 3))
    for i in range(3):
        cluster.create(PODS, _member(f"m{i}", names.SCHEDULER_NAME, group="gang"))
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    scheduler.schedule_once()
    assert _bound(cluster) == []


def test_first_fit_frees_a_node_when_its_pod_finishes() -> None:
    cluster = FakeCluster()
    cluster.create(NODES, make_node_dict("n1", 4, "16Gi", pods=None))
    cluster.create(PODS, _member("a", DEFAULT_SCHEDULER))
    cluster.create(PODS, _member("b", DEFAULT_SCHEDULER))
    scheduler = FirstFitScheduler(cluster, clock=lambda: 5.0)
    scheduler.start()
    assert scheduler.schedule_once() == {"default/a": "n1"}
    cluster.patch_status(PODS, "a", {"status": {"phase": "Succeeded"}})
    scheduler.pump()
    scheduler.queue[("default", "b")].backoff_until = 0
    assert scheduler.schedule_once() == {"default/b": "n1"}


def _hybrid(scenario: Scenario, arm: str, size: int = 4) -> Run:
    plan = JobPlan(
        "qaoa-4", "qaoa", size, 0.0, "1", "1Gi", 30.0, QuantumSpec(backend="slow", shots=100)
    )
    return Run(scenario, arm, [plan], seed=("test", 1)).execute()


def test_the_ungated_gang_starts_every_worker_with_the_scout_and_idles_them(
    two_queue: Scenario,
) -> None:
    run = _hybrid(two_queue, "gang-ungated")
    job = run.jobs["qaoa-4"]
    assert job.task is not None and job.task.start > 60  # a long vendor queue
    workers = [p for p in job.pods.values() if not p.producer]
    assert all(p.bound_at == job.pods[0].bound_at for p in workers)  # one all-or-nothing placement
    for worker in workers:
        assert worker.running_at is not None and worker.app_start is not None
        assert worker.app_start - worker.running_at > job.task.start - 10  # idled through the queue
    assert job.sidecar is None


def test_fluence_keeps_workers_gated_until_the_task_reaches_the_head(two_queue: Scenario) -> None:
    run = _hybrid(two_queue, "fluence")
    job = run.jobs["qaoa-4"]
    task = job.task
    assert task is not None and job.done_at is not None
    assert job.sidecar is not None and job.sidecar.outcome.value == names.SCOUT_STATUS_READY
    head = task.ahead_starts[-1] if task.ahead_starts else task.submitted  # position 1 from here
    workers = [p for p in job.pods.values() if not p.producer]
    assert sorted(job.sidecar.ungated) == sorted(p.name for p in workers)
    for worker in workers:
        assert worker.bound_at is not None and worker.bound_at >= head
        assert worker.app_start is not None and worker.running_at is not None
        assert worker.app_start - worker.running_at < task.done - head
    scout = run.cluster.get(PODS, job.pods[0].name)
    assert scout is not None
    assert scout["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_SCOUT
    assert any(c["name"] == names.SIDECAR_CONTAINER for c in scout["spec"]["containers"])
    assert run.cluster.get(PODGROUPS, "qaoa-4" + names.SCOUT_GROUP_SUFFIX) is not None
