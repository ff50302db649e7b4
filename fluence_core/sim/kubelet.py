"""The simulated kubelets and applications, and the scout's real sidecar.

A bound pod starts after a startup delay drawn from the scenario and its phases are
written through ``patch_status``. A gang's application starts once every member runs
(its launcher gives up after the scenario's peer timeout, and the Job controller
retries); a hybrid job's scout submits its task to the vendor queue, its consumers
start once the result is there, and the scout's sidecar is Fluence's own
:class:`~fluence_core.hybrid.sidecar.Sidecar`, configured from the environment the
webhook wrote into its container, its reports applied in process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fluence_core import names
from fluence_core.hybrid.reporter import LocalReporter
from fluence_core.hybrid.sidecar import Sidecar, SidecarConfig, SidecarResult
from fluence_core.kube.api import DELETED, PODS, RESOURCE_CLAIMS, KubeObject
from fluence_core.kube.downward import container_env
from fluence_core.kube.errors import ApiError
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.meta import annotations_of
from fluence_core.log import logger
from fluence_core.runtime.provider import Backend, attributes_from_env, resolve_provider
from fluence_core.settings import Settings, SettingsVariables, load_settings
from fluence_core.sim.engine import Engine, Process, ProcessClock
from fluence_core.sim.qpu_claims import claim_env
from fluence_core.sim.jobs import NAMESPACE, JobController, JobState, PodRecord, claim_name
from fluence_core.sim.scenario import Scenario
from fluence_core.sim.vendor import SimQueueProvider, stable_rng


def settings_from_env(env: dict[str, str], **overrides: Any) -> Settings:
    """Settings as ``load_settings`` reads them inside the container, from ``env``."""
    values = {k[len(names.SETTINGS_ENV_PREFIX):].lower(): v for k, v in env.items()
              if k.startswith(names.SETTINGS_ENV_PREFIX)}
    values.update(overrides)
    known = set(SettingsVariables.model_fields)
    return load_settings(**{k: v for k, v in values.items() if k in known})


class Kubelet:
    """Every node's kubelet, the applications in the pods, and the scouts' sidecars."""

    def __init__(self, *, engine: Engine, cluster: FakeCluster, settings: Settings,
                 provider: SimQueueProvider, scenario: Scenario, arm: str, seed: object,
                 jobs: dict[str, JobState], records: dict[str, PodRecord],
                 controller: JobController, stamp: Callable[[], datetime],
                 job_done: Callable[[], None]) -> None:
        self.engine = engine
        self.cluster = cluster
        self.settings = settings
        self.provider = provider
        self.scenario = scenario
        self.arm = arm
        self.seed = seed
        self.jobs = jobs
        self.records = records
        self.controller = controller
        self.stamp = stamp
        self.job_done = job_done
        """Called once for each job whose every pod has finished."""
        self.processes: list[Process] = []
        """The sidecars spawned, as the engine runs them."""
        self._seen: str | None = cluster.resource_version

    def watch(self) -> None:
        """Watch pods as the kubelets do: a newly bound pod starts after its startup delay."""
        for event, obj in self.cluster.watch(PODS, resource_version=self._seen, timeout=0):
            self._seen = obj["metadata"].get("resourceVersion") or self._seen
            record = self.records.get(obj["metadata"]["name"])
            if record is None or event == DELETED:
                continue
            node = (obj.get("spec") or {}).get("nodeName")
            if node and record.bound_at is None and not obj["metadata"].get("deletionTimestamp"):
                record.bound_at, record.node = self.engine.now, node
                job = self.jobs[record.job]
                if job.all_bound is None and all(p.bound_at is not None for p in job.pods.values()):
                    job.all_bound = self.engine.now
                rng = stable_rng(self.seed, record.job, record.attempt, record.index, "startup")
                startup = self.scenario.lifecycle.startup
                self.engine.after(rng.uniform(startup.min, startup.max), self._started, record)

    def _current(self, record: PodRecord) -> bool:
        job = self.jobs[record.job]
        return (
            not record.killed
            and record.attempt == job.attempt
            and job.pods.get(record.index) is record
        )

    def _set_phase(self, record: PodRecord, phase: str) -> None:
        record.phase = phase
        status: dict[str, Any] = {"phase": phase}
        if phase == "Running":
            status["startTime"] = self.stamp().strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self.cluster.patch_status(PODS, record.name, {"status": status}, NAMESPACE)
        except ApiError as error:
            logger.debug("sim: %s -> %s: %s", record.name, phase, error)

    def _started(self, record: PodRecord) -> None:
        if not self._current(record) or record.running_at is not None:
            return
        record.running_at = self.engine.now
        self._set_phase(record, "Running")
        job = self.jobs[record.job]
        if not job.quantum:
            self._gang_barrier(job)
        elif record.producer:
            self._submit(job, record)
        elif job.result_at is not None:  # the result was there before this consumer was
            if job.task is not None and job.task.failed:
                self._finish(job, record, "Failed")
            else:
                self._run_app(job, record)

    def _gang_barrier(self, job: JobState) -> None:
        members = [job.pods.get(i) for i in range(job.plan.size)]
        if all(m is not None and m.running_at is not None for m in members):
            for member in members:
                assert member is not None
                self._run_app(job, member)
            job.app_start = self.engine.now
        else:
            self.engine.after(
                self.scenario.lifecycle.peer_timeout, self._peer_timeout, job, job.attempt
            )

    def _peer_timeout(self, job: JobState, attempt: int) -> None:
        """The launcher gave up on missing peers: the attempt fails, the Job tries again."""
        if job.attempt != attempt or job.app_start is not None or job.done_at is not None:
            return
        waited = [p for p in job.pods.values() if p.running_at is not None]
        if not waited or self.engine.now - min(p.running_at or 0 for p in waited) < \
                self.scenario.lifecycle.peer_timeout - 1e-9:
            return
        self.controller.retry(job)

    def _run_app(self, job: JobState, record: PodRecord) -> None:
        record.app_start = self.engine.now
        self.engine.after(job.plan.runtime, self._app_done, record)

    def _submit(self, job: JobState, record: PodRecord) -> None:
        """The scout's program submits its task (the interceptor tags it with the pod's uid)."""
        pod = self.cluster.get(PODS, record.name, NAMESPACE) or {}
        quantum = job.plan.quantum
        assert quantum is not None
        chosen = annotations_of(pod).get(
            names.BACKEND_ANNOTATION
        ) or claim_env(self.cluster, pod).get(names.ENV_BACKEND)
        backend = chosen or quantum.backend or next(
            n for n, m in self.scenario.backends.items() if m.type == quantum.type)
        job.backend = backend
        job.task = self.provider.submit(backend, record.uid, quantum.shots)
        self.engine.at(job.task.done, self._result, job)
        if self.arm == "fluence" and self._has_sidecar(pod):
            self.processes.append(self.engine.spawn(
                lambda clock: self._sidecar(pod, clock), f"sidecar-{record.name}",
                on_exit=lambda process: self._sidecar_exited(job, process)))
        else:
            job.sidecar_done = True

    @staticmethod
    def _has_sidecar(pod: KubeObject) -> bool:
        return any(
            c.get("name") == names.SIDECAR_CONTAINER
            for c in (pod.get("spec") or {}).get("containers") or []
        )

    def _sidecar(self, pod: KubeObject, clock: ProcessClock) -> SidecarResult:
        """``fluence sidecar`` as its container runs it, with the env the webhook wrote."""
        env = container_env(pod, names.SIDECAR_CONTAINER)
        if (pod.get("spec") or {}).get("resourceClaims"):
            env.update(claim_env(self.cluster, pod))  # the kubelet plugin's CDI device
        settings = settings_from_env(env, sidecar_poll_interval=self.settings.sidecar.poll_interval,
                                     ungate_position=self.settings.sidecar.ungate_position,
                                     find_task_timeout=self.settings.sidecar.find_task_timeout)
        attributes = attributes_from_env(env)
        provider = resolve_provider(attributes, [self.provider])
        config = dataclasses.replace(
            SidecarConfig.from_settings(settings, Backend.from_attributes(attributes)),
            runtime_dir=None,
        )
        # Its reports are applied in process, with Fluence's own settings (the gate).
        fluence = LocalReporter(self.cluster, config.namespace, config.pod_name,
                                self.settings.hybrid.quantum_gate)
        return Sidecar(fluence, provider, config, clock).run()

    def _sidecar_exited(self, job: JobState, process: Process) -> None:
        job.sidecar = process.result
        job.sidecar_done = True
        producer = job.pods.get(0)
        if producer is not None and job.producer_app_done and producer.finished_at is None:
            self._finish(job, producer, "Succeeded")

    def _result(self, job: JobState) -> None:
        job.result_at = self.engine.now
        task = job.task
        assert task is not None
        failed = task.failed
        for record in job.pods.values():
            if record.running_at is None or record.app_start is not None:
                continue
            if failed:
                self._finish(job, record, "Failed")
            else:
                self._run_app(job, record)

    def _app_done(self, record: PodRecord) -> None:
        if not self._current(record):
            return
        job = self.jobs[record.job]
        if job.quantum and record.producer:
            job.producer_app_done = True
            if not job.sidecar_done:
                return  # the pod ends when its sidecar does
        self._finish(job, record, "Succeeded")

    def _finish(self, job: JobState, record: PodRecord, phase: str) -> None:
        if record.finished_at is not None:
            return
        record.finished_at = self.engine.now
        self._set_phase(record, phase)
        if self.scenario.lifecycle.delete_finished:
            self.cluster.delete(PODS, record.name, NAMESPACE)
        if len(job.pods) == job.plan.size and all(
            p.finished_at is not None for p in job.pods.values()
        ):
            job.done_at = self.engine.now
            if job.plan.quantum is not None and job.plan.quantum.claim:
                # the Job's owner deletes the claim with it: the backend is free again
                self.cluster.delete(RESOURCE_CLAIMS, claim_name(job), NAMESPACE)
            self.job_done()
