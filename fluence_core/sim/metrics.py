"""What one simulated run did, as rows: one per job, and one for the run.

The experiments' report (:mod:`~fluence_core.sim.report`) averages these over seeds and
compares the arms; they are read from the job and pod records the Job controller and the
kubelet kept, after the run ended.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from fluence_core.sim.jobs import JobState, PodRecord


def job_metrics(jobs: Iterable[JobState], now: float) -> list[dict[str, Any]]:
    """One row per job: waits, idle node-seconds, restarts, and for hybrid jobs the task
    (``now``: when the run ended, the end of a wait still going on)."""
    rows = []
    for job in jobs:
        plan = job.plan
        pods = list(job.pods.values())
        idle = 0.0
        for record in pods + job.history:
            if record.running_at is None:
                continue
            if job.quantum and record.producer:
                continue  # the scout's own wait is the task's, in every arm
            until = record.app_start if record.app_start is not None else record.finished_at
            if until is None:
                until = now  # still waiting when the run ended
            idle += max(0.0, until - record.running_at)
        task = job.task
        row: dict[str, Any] = {
            "job": plan.id,
            "template": plan.template,
            "size": plan.size,
            "arrival": plan.arrival,
            "placed": job.all_bound is not None,
            "wait": None if job.all_bound is None else job.all_bound - plan.arrival,
            "idle_node_s": idle,
            "restarts": job.attempt,
            "refusals": job.refusals,
            "done": job.done_at is not None,
            "turnaround": None if job.done_at is None else job.done_at - plan.arrival,
        }
        if job.quantum:
            row.update(
                {
                    "backend": job.backend,
                    "policy": plan.policy,
                    "cost": task.cost if task is not None else None,
                    "queue_wait": None if task is None else task.start - task.submitted,
                    "time_to_result": None
                    if job.result_at is None
                    else job.result_at - plan.arrival,
                    "sidecar": None if job.sidecar is None else job.sidecar.outcome.value,
                }
            )
        rows.append(row)
    return rows


def run_metrics(arm: str, jobs: Collection[JobState], pods: Collection[PodRecord], *,
                first_arrival: float, now: float, events: int, cycles: int) -> dict[str, Any]:
    """The run's row: jobs done, pods made and placed, the makespan and the engine's work."""
    done = [j.done_at for j in jobs if j.done_at is not None]
    placed = sum(1 for r in pods if r.bound_at is not None)
    return {"arm": arm, "jobs": len(jobs), "jobs_done": len(done),
            "pods_created": len(pods), "pods_placed": placed,
            "makespan": (max(done) - first_arrival) if done else None, "end": now,
            "events": events, "cycles": cycles}
