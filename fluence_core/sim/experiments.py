"""From a scenario to paired runs, and from runs to the numbers each experiment reports.

Every cell (a repeat, a backend and size, a policy) is run once per arm from an
empty cluster with the same plan and the same seed, so the arms meet the same
arrivals, start-up delays, run times and vendor queues; only the mechanics
differ. Results are plain dicts (the JSON file is exactly what is returned).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fluence_core.sim.scenario import Range, Scenario
from fluence_core.sim.vendor import stable_rng
from fluence_core.sim.world import JobPlan, Run

Progress = Callable[[str], None]
"""Called once per finished run with a short label."""


@dataclass
class Cell:
    """One run to do: which arm, which plans, which seed, and labels for grouping."""

    arm: str
    plans: list[JobPlan]
    seed: object
    labels: dict[str, Any] = field(default_factory=dict)


def _uniform(rng: Any, value: Range) -> float:
    return value.min if value.max == value.min else rng.uniform(value.min, value.max)


def expand_workload(scenario: Scenario, repeat: int, *, policy: str | None = None) -> list[JobPlan]:
    """The jobs of one repeat: sizes expanded, shuffled when asked, arrivals and run times drawn."""
    plans: list[JobPlan] = []
    for spec in scenario.workload:
        rng = stable_rng(scenario.seed, repeat, spec.name, "plan")
        sizes = spec.gang_sizes
        if spec.shuffle:
            rng.shuffle(sizes)
        for i, size in enumerate(sizes):
            if isinstance(spec.arrive, Range):
                arrival = _uniform(rng, spec.arrive)
            else:
                arrival = spec.arrive.get("start", 0.0) + i * spec.arrive.get("every", 0.0)
            runtime = _uniform(rng, spec.runtime)
            plans.append(JobPlan(
                id=f"{spec.name}-{i:04d}-s{size}", template=spec.name, size=size, arrival=arrival,
                cpu=spec.cpu, memory=spec.memory, runtime=runtime, quantum=spec.quantum,
                policy=policy if spec.quantum is not None else None))
    plans.sort(key=lambda p: (p.arrival, p.id))
    return plans


def cells(scenario: Scenario) -> list[Cell]:
    """Every run the scenario asks for, arms paired within each cell."""
    found: list[Cell] = []
    if scenario.experiment == "two-queue":
        assert scenario.sweep is not None
        template = scenario.workload[0]
        assert template.quantum is not None
        for backend in scenario.sweep.backends:
            for size in scenario.sweep.sizes:
                quantum = template.quantum.model_copy(update={"backend": backend})
                for repeat in range(scenario.repeats):
                    rng = stable_rng(scenario.seed, backend, size, repeat, "plan")
                    plan = JobPlan(
                        f"{template.name}-{size}",
                        template.name,
                        size,
                        0.0,
                        template.cpu,
                        template.memory,
                        _uniform(rng, template.runtime),
                        quantum,
                    )
                    for arm in scenario.schedulers:
                        found.append(Cell(arm, [plan], (scenario.seed, backend, size, repeat),
                                          {"backend": backend, "size": size, "repeat": repeat}))
        return found
    if scenario.experiment == "selection":
        arm = scenario.schedulers[0]
        for repeat in range(scenario.repeats):
            for policy in scenario.policies:
                found.append(Cell(arm, expand_workload(scenario, repeat, policy=policy),
                                  (scenario.seed, repeat), {"policy": policy, "repeat": repeat}))
        return found
    for repeat in range(scenario.repeats):
        plans = expand_workload(scenario, repeat)
        for arm in scenario.schedulers:
            found.append(Cell(arm, plans, (scenario.seed, repeat), {"repeat": repeat}))
    return found


def run_cells(
    scenario: Scenario, todo: list[Cell], progress: Progress | None = None
) -> list[dict[str, Any]]:
    """Run each cell; one record per run with its labels, run metrics and job rows."""
    runs = []
    for cell in todo:
        started = time.perf_counter()
        run = Run(scenario, cell.arm, cell.plans, seed=cell.seed).execute()
        wall = time.perf_counter() - started
        metrics = run.run_metrics()
        metrics["wall_s"] = wall
        runs.append({"arm": cell.arm, **cell.labels, "run": metrics, "jobs": run.job_metrics()})
        if progress is not None:
            progress(f"{cell.arm} {' '.join(f'{k}={v}' for k, v in cell.labels.items())}")
    return runs


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarise(scenario: Scenario, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The experiment's numbers, by arm (and size, backend or policy)."""
    kind = scenario.experiment
    if kind == "two-queue":
        return _two_queue(scenario, runs)
    if kind == "selection":
        return _selection(scenario, runs)
    if kind == "gang-contention":
        return _gang_contention(scenario, runs)
    return _workload(scenario, runs)


def _jobs(runs: list[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    return [
        job for run in runs if all(run.get(k) == v for k, v in match.items()) for job in run["jobs"]
    ]


def _workload(scenario: Scenario, runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for arm in scenario.schedulers:
        jobs = _jobs(runs, arm=arm)
        arm_runs = [r for r in runs if r["arm"] == arm]
        waits = [j["wait"] for j in jobs if j["wait"] is not None]
        quantum = [j for j in jobs if "backend" in j]
        makespans = [r["run"]["makespan"] for r in arm_runs if r["run"]["makespan"] is not None]
        rows.append({
            "arm": arm,
            "jobs": len(jobs),
            "done": sum(j["done"] for j in jobs),
            "pods_placed": sum(r["run"]["pods_placed"] for r in arm_runs),
            "mean_wait": _mean(waits),
            "max_wait": max(waits) if waits else None,
            "idle_node_s": sum(j["idle_node_s"] for j in jobs if "backend" not in j),
            "consumer_idle_s": sum(j["idle_node_s"] for j in quantum),
            "restarts": sum(j["restarts"] for j in jobs),
            "makespan": _mean(makespans),
        })
    return {"rows": rows}


def _gang_contention(scenario: Scenario, runs: list[dict[str, Any]]) -> dict[str, Any]:
    sizes = sorted({j["size"] for run in runs for j in run["jobs"]})
    rows = []
    for size in sizes:
        for arm in scenario.schedulers:
            jobs = [j for j in _jobs(runs, arm=arm) if j["size"] == size]
            idle = [j["idle_node_s"] for j in jobs]
            rows.append({
                "size": size, "arm": arm, "gangs": len(jobs),
                "mean_idle_per_gang": _mean(idle), "max_idle_per_gang": max(idle) if idle else None,
                "wasted_node_s": sum(idle), "restarts": sum(j["restarts"] for j in jobs),
                "mean_wait": _mean([j["wait"] for j in jobs if j["wait"] is not None]),
                "unfinished": sum(not j["done"] for j in jobs),
            })
    totals = {
        arm: sum(j["idle_node_s"] for j in _jobs(runs, arm=arm)) for arm in scenario.schedulers
    }
    makespan = {
        arm: _mean([r["run"]["makespan"] for r in runs if r["arm"] == arm and r["run"]["makespan"]])
        for arm in scenario.schedulers
    }
    per_gang = [{"arm": run["arm"], "repeat": run.get("repeat"), "job": j["job"], "size": j["size"],
                 "idle_node_s": j["idle_node_s"]} for run in runs for j in run["jobs"]]
    return {
        "rows": rows,
        "total_wasted_node_s": totals,
        "mean_makespan": makespan,
        "per_gang": per_gang,
    }


def _two_queue(scenario: Scenario, runs: list[dict[str, Any]]) -> dict[str, Any]:
    assert scenario.sweep is not None
    rows = []
    for backend in scenario.sweep.backends:
        for size in scenario.sweep.sizes:
            row: dict[str, Any] = {"backend": backend, "size": size}
            for arm in scenario.schedulers:
                jobs = _jobs(runs, arm=arm, backend=backend, size=size)
                row[arm] = sum(j["idle_node_s"] for j in jobs)
                row[f"{arm}_queue_wait"] = _mean(
                    [j["queue_wait"] for j in jobs if j.get("queue_wait") is not None]
                )
                row[f"{arm}_turnaround"] = _mean(
                    [j["turnaround"] for j in jobs if j["turnaround"] is not None]
                )
            if "fluence" in scenario.schedulers:
                others = [a for a in scenario.schedulers if a != "fluence"]
                for other in others:
                    row[f"ratio_{other}"] = (
                        (row[other] / row["fluence"]) if row["fluence"] > 0 else None
                    )
            rows.append(row)
    return {"rows": rows, "repeats": scenario.repeats}


def _selection(scenario: Scenario, runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for policy in scenario.policies:
        jobs = [j for j in _jobs(runs, policy=policy) if "backend" in j]
        costs = [j["cost"] for j in jobs if j["cost"] is not None]
        times = [j["time_to_result"] for j in jobs if j["time_to_result"] is not None]
        chosen: dict[str, int] = {}
        for j in jobs:
            chosen[j["backend"]] = chosen.get(j["backend"], 0) + 1
        rows.append(
            {
                "policy": policy,
                "runs": len(jobs),
                "mean_cost": _mean(costs),
                "sd_cost": statistics.pstdev(costs) if len(costs) > 1 else 0.0,
                "mean_time_to_result": _mean(times),
                "sd_time_to_result": statistics.pstdev(times) if len(times) > 1 else 0.0,
                "chosen": dict(sorted(chosen.items())),
                "costs": costs,
                "times": times,
            }
        )
    return {"rows": rows}


def run_scenario(scenario: Scenario, progress: Progress | None = None,
                 on_plan: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Run every cell and summarise; the dict is what the JSON results file holds."""
    todo = cells(scenario)
    if on_plan is not None:
        on_plan(len(todo))
    started = time.perf_counter()
    runs = run_cells(scenario, todo, progress)
    wall = time.perf_counter() - started
    pods = sum(r["run"]["pods_placed"] for r in runs)
    return {
        "scenario": scenario.name,
        "description": scenario.description,
        "experiment": scenario.experiment,
        "source": scenario.source,
        "seed": scenario.seed,
        "schedulers": list(scenario.schedulers),
        "summary": summarise(scenario, runs),
        "performance": {"runs": len(runs), "wall_s": wall, "pods_placed": pods,
                        "sim_pods_per_s": pods / wall if wall > 0 else None,
                        "virtual_s": sum(r["run"]["end"] for r in runs),
                        "events": sum(r["run"]["events"] for r in runs),
                        "cycles": sum(r["run"]["cycles"] for r in runs)},
        "runs": runs,
    }
