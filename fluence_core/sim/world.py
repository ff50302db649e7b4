"""One simulated run: a cluster, one arm's scheduler, the workload and the vendors, in virtual time.

What is real and what is simulated:

* real: the :class:`~fluence_core.kube.fake.FakeCluster` API semantics
  (binding, gates, PodGroups, status), the webhook's handler chain and every
  installed plugin's admission hooks, admission control among them, on the
  simulation's clock (through :meth:`AdmissionService.review`, the function the
  HTTPS server calls), Fluence's :class:`~fluence_core.scheduler.core.Scheduler`
  and matcher, the :class:`~fluence_core.hybrid.sidecar.Sidecar` (configured
  from the env the webhook wrote into its container) and ``fluence select``'s
  ranking;
* simulated: the Job controller (creates the pods of a gang, recreates them
  when an attempt fails), the kubelet (bound -> Running after a startup delay,
  phases through ``patch_status``), the applications (a gang's app starts when
  every member runs; a hybrid job's consumers need the scout's quantum result)
  and the vendor queues (:mod:`fluence_core.sim.vendor`), each in a module of its
  own: :mod:`~fluence_core.sim.jobs`, :mod:`~fluence_core.sim.kubelet`, with the
  figures read afterwards in :mod:`~fluence_core.sim.metrics`.

Arms differ only in mechanics: ``fluence`` pods opt in to Fluence and hybrid
groups use shared coordination (the webhook splits them and gates the
workers); ``gang-ungated`` pods are the same gangs through Fluence without the
split (every member starts together, the workers idle through the vendor
queue); ``first-fit`` pods go to :class:`~fluence_core.sim.baseline.FirstFitScheduler`.
"""

from __future__ import annotations

import logging
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fluence_core import names
from fluence_core.kube.api import NODES, PRIORITY_CLASSES
from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.resource_config import ResourceConfig
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.sim.baseline import FirstFitScheduler
from fluence_core.sim.engine import Engine, Process
from fluence_core.sim.jobs import JobController, JobPlan, JobState, PodRecord
from fluence_core.sim.kubelet import Kubelet
from fluence_core.sim.metrics import job_metrics, run_metrics
from fluence_core.sim.qpu_claims import qpu_objects
from fluence_core.sim.scenario import Scenario
from fluence_core.sim.vendor import BackendQueue, SimQueueProvider
from fluence_core.webhook import build_service

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

__all__ = ["EPOCH", "JobPlan", "Run"]


class Run:
    """One arm of one scenario cell, from an empty cluster to the last job's end."""

    def __init__(self, scenario: Scenario, arm: str, plans: list[JobPlan], *, seed: object,
                 workdir: Path | None = None) -> None:
        self.scenario = scenario
        self.arm = arm
        self.plans = plans
        self.seed = seed
        self.engine = Engine()
        self.cluster = FakeCluster(
            now=self._stamp, clock=lambda: self.engine.now, history=10_000_000
        )
        self.jobs: dict[str, JobState] = {p.id: JobState(p) for p in plans}
        self.records: dict[str, PodRecord] = {}
        self.queues = {name: BackendQueue(name, model, (seed, "vendor"))
                       for name, model in scenario.backends.items()}
        self.provider = SimQueueProvider(lambda: self.engine.now, self.queues)
        self._workdir = workdir
        self._seen_rv = ""
        self._cycle_at: float | None = None
        self._last_cycle = -1e18
        self._remaining = len(plans)
        self.cycles = 0
        self.jobs_controller: JobController
        self.kubelet: Kubelet

    def _stamp(self) -> datetime:
        return EPOCH + timedelta(seconds=self.engine.now)

    # -- set-up --------------------------------------------------------------------------

    def _setup(self, workdir: Path) -> None:
        resources = workdir / "resources.yaml"
        from fluence_core.sim.scenario import resources_yaml

        resources.write_text(resources_yaml(self.scenario))
        self.settings = load_settings(
            resources=resources,
            sidecar_poll_interval=self.scenario.sidecar.poll_interval,
            ungate_position=self.scenario.sidecar.ungate_position,
            find_task_timeout=self.scenario.sidecar.find_timeout,
            leader_elect=False,
            webhook_handlers="",
        )
        self.manager = get_plugin_manager(self.settings)
        # Every plugin runs as in the webhook; the ones that keep time (admission
        # control's promises) keep the simulation's.
        self.service = build_service(self.settings, self.manager, self.cluster,
                                     clock=lambda: self.engine.now)
        self.config: ResourceConfig = self.service.resource_config
        self.cluster.create(PRIORITY_CLASSES, {
            "metadata": {"name": names.QUANTUM_PRIORITY_CLASS}, "value": 1000,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": "ungated quantum-classical workers go first"})
        for group in self.scenario.cluster.nodes:
            for i in range(group.count):
                allocatable = {"cpu": str(group.cpu), "memory": group.memory, "pods": "110"}
                self.cluster.create(
                    NODES,
                    {
                        "metadata": {
                            "name": f"{group.prefix}-{i:04d}",
                            "labels": dict(group.labels),
                        },
                        "status": {"capacity": allocatable, "allocatable": allocatable},
                    },
                )
        if any(p.quantum is not None and p.quantum.claim for p in self.plans):
            qpu_objects(self.cluster, self.config)
        self.scheduler: Scheduler | FirstFitScheduler
        if self.arm == "first-fit":
            self.scheduler = FirstFitScheduler(self.cluster, clock=lambda: self.engine.now)
        else:
            self.scheduler = Scheduler(
                self.cluster,
                self.settings,
                self.manager,
                config=self.config,
                clock=lambda: self.engine.now,
            )
        self.scheduler.start()
        self.jobs_controller = JobController(
            engine=self.engine, cluster=self.cluster, service=self.service, config=self.config,
            provider=self.provider, scenario=self.scenario, arm=self.arm, seed=self.seed,
            jobs=self.jobs, records=self.records)
        self.kubelet = Kubelet(
            engine=self.engine, cluster=self.cluster, settings=self.settings,
            provider=self.provider, scenario=self.scenario, arm=self.arm, seed=self.seed,
            jobs=self.jobs, records=self.records, controller=self.jobs_controller,
            stamp=self._stamp, job_done=self._job_done)
        self._seen_rv = self.cluster.resource_version

    def _job_done(self) -> None:
        self._remaining -= 1

    # -- the loop ------------------------------------------------------------------------

    def execute(self) -> Run:
        fluence_logger = logging.getLogger(names.LOGGER_NAME)
        with tempfile.TemporaryDirectory(prefix="fluence-sim-") as tmp:
            self._setup(Path(tmp))
            for plan in self.plans:
                self.engine.at(plan.arrival, self.jobs_controller.arrive, plan)
            horizon = self.scenario.horizon
            try:
                while self._remaining > 0:
                    upcoming = self.engine.next_time()
                    if upcoming is None or upcoming > horizon:
                        break
                    self.engine.step()
                    if self.cluster.resource_version != self._seen_rv:
                        self._changed()
            finally:
                self.engine.shutdown()
        fluence_logger.debug(
            "run %s/%s: %d events, %d cycles", self.arm, self.seed, self.engine.events, self.cycles
        )
        return self

    def _changed(self) -> None:
        self._seen_rv = self.cluster.resource_version
        self.kubelet.watch()
        if self._cycle_at is None:
            when = max(self.engine.now, self._last_cycle + self.scenario.lifecycle.scheduler_period)
            self._cycle_at = when
            self.engine.at(when, self._cycle)

    def _cycle(self) -> None:
        self._cycle_at = None
        self._last_cycle = self.engine.now
        self.cycles += 1
        self.scheduler.pump()
        self.scheduler.schedule_once()
        self.scheduler.pump()
        self.kubelet.watch()
        self._seen_rv = self.cluster.resource_version
        wake = self.scheduler.next_wakeup()  # a backoff that expires with nothing changed
        if wake is not None:
            self.engine.at(wake, self._wake)

    def _wake(self) -> None:
        if self._cycle_at is None:
            self._cycle_at = self.engine.now
            self.engine.at(self.engine.now, self._cycle)

    # -- what happened -------------------------------------------------------------------

    @property
    def processes(self) -> list[Process]:
        """The sidecars the run spawned."""
        return self.kubelet.processes

    def job_metrics(self) -> list[dict[str, Any]]:
        """One row per job (:func:`~fluence_core.sim.metrics.job_metrics`)."""
        return job_metrics(self.jobs.values(), self.engine.now)

    def run_metrics(self) -> dict[str, Any]:
        """The run's row (:func:`~fluence_core.sim.metrics.run_metrics`)."""
        return run_metrics(self.arm, list(self.jobs.values()), list(self.records.values()),
                           first_arrival=min((p.arrival for p in self.plans), default=0.0),
                           now=self.engine.now, events=self.engine.events, cycles=self.cycles)
