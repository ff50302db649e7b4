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
  and the vendor queues (:mod:`fluence_core.sim.vendor`).

Arms differ only in mechanics: ``fluence`` pods opt in to Fluence and hybrid
groups use shared coordination (the webhook splits them and gates the
workers); ``gang-ungated`` pods are the same gangs through Fluence without the
split (every member starts together, the workers idle through the vendor
queue); ``first-fit`` pods go to :class:`~fluence_core.sim.baseline.FirstFitScheduler`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fluence_core import names
from fluence_core.kube.api import (
    DELETED, NODES, PODS, PRIORITY_CLASSES, RESOURCE_CLAIMS, KubeObject,
)
from fluence_core.kube.downward import container_env
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.plugins import get_plugin_manager
from fluence_core.resource_config import ResourceConfig
from fluence_core.runtime import select
from fluence_core.runtime.provider import Backend, attributes_from_env, resolve_provider
from fluence_core.hybrid.reporter import LocalReporter
from fluence_core.hybrid.sidecar import Sidecar, SidecarConfig, SidecarResult
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import Settings, load_settings
from fluence_core.sim.baseline import DEFAULT_SCHEDULER, FirstFitScheduler
from fluence_core.sim.engine import Engine, Process, ProcessClock
from fluence_core.sim.qpu_claims import claim_env, job_claim, qpu_objects
from fluence_core.sim.scenario import RANDOM_POLICY, QuantumSpec, Scenario
from fluence_core.sim.vendor import BackendQueue, SimQueueProvider, SimTask, stable_rng
from fluence_core.webhook import build_service
from fluence_core.kube.meta import annotations_of

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
NAMESPACE = "default"
ADMISSION_RETRY = 30.0
"""Seconds before the Job controller tries again to create a pod admission refused."""


@dataclass(frozen=True)
class JobPlan:
    """One gang to submit; the same plan runs under every arm."""

    id: str
    template: str
    size: int
    arrival: float
    cpu: str
    memory: str
    runtime: float
    quantum: QuantumSpec | None = None
    policy: str | None = None


@dataclass
class PodRecord:
    name: str
    job: str
    index: int
    attempt: int
    uid: str = ""
    created: float | None = None
    bound_at: float | None = None
    node: str | None = None
    running_at: float | None = None
    app_start: float | None = None
    finished_at: float | None = None
    phase: str = "Pending"
    killed: bool = False

    @property
    def producer(self) -> bool:
        return self.index == 0


@dataclass
class JobState:
    plan: JobPlan
    attempt: int = 0
    pods: dict[int, PodRecord] = field(default_factory=dict)
    history: list[PodRecord] = field(default_factory=list)
    app_start: float | None = None
    all_bound: float | None = None
    done_at: float | None = None
    task: SimTask | None = None
    backend: str | None = None
    selection: dict[str, Any] | None = None
    result_at: float | None = None
    sidecar: SidecarResult | None = None
    sidecar_done: bool = False
    producer_app_done: bool = False
    refusals: int = 0

    @property
    def quantum(self) -> bool:
        return self.plan.quantum is not None


def settings_from_env(env: dict[str, str], **overrides: Any) -> Settings:
    """Settings as ``load_settings`` reads them inside the container, from ``env``."""
    values = {k[len(names.SETTINGS_ENV_PREFIX):].lower(): v for k, v in env.items()
              if k.startswith(names.SETTINGS_ENV_PREFIX)}
    values.update(overrides)
    known = set(Settings.model_fields)
    return load_settings(**{k: v for k, v in values.items() if k in known})


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
        self._kubelet_rv: str | None = None
        self._cycle_at: float | None = None
        self._last_cycle = -1e18
        self._tokens: dict[str, int] = {}
        self._remaining = len(plans)
        self.cycles = 0
        self.processes: list[Process] = []

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
        self._kubelet_rv = self.cluster.resource_version
        self._seen_rv = self.cluster.resource_version

    # -- the loop ------------------------------------------------------------------------

    def execute(self) -> Run:
        fluence_logger = logging.getLogger(names.LOGGER_NAME)
        with tempfile.TemporaryDirectory(prefix="fluence-sim-") as tmp:
            self._setup(Path(tmp))
            for plan in self.plans:
                self.engine.at(plan.arrival, self._arrive, plan)
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
        self._kubelet()
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
        self._kubelet()
        self._seen_rv = self.cluster.resource_version
        wake = self.scheduler.next_wakeup()  # a backoff that expires with nothing changed
        if wake is not None:
            self.engine.at(wake, self._wake)

    def _wake(self) -> None:
        if self._cycle_at is None:
            self._cycle_at = self.engine.now
            self.engine.at(self.engine.now, self._cycle)

    def _kubelet(self) -> None:
        """Watch pods as the kubelets do: a newly bound pod starts after its startup delay."""
        for event, obj in self.cluster.watch(PODS, resource_version=self._kubelet_rv, timeout=0):
            self._kubelet_rv = obj["metadata"].get("resourceVersion") or self._kubelet_rv
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

    # -- the Job controller --------------------------------------------------------------

    def _arrive(self, plan: JobPlan) -> None:
        job = self.jobs[plan.id]
        if plan.quantum is not None and plan.policy is not None:
            job.selection = self._select(plan)
        if plan.quantum is not None and plan.quantum.claim:
            picked = job.selection["_selection"].chosen if job.selection else None
            chosen = picked.backend.name if picked is not None else plan.quantum.backend
            self.cluster.create(RESOURCE_CLAIMS, job_claim(
                self._claim_name(job), plan.quantum.type, chosen), NAMESPACE)
        self._create_attempt(job)

    @staticmethod
    def _claim_name(job: JobState) -> str:
        return f"{job.plan.id}-qpu"

    def _select(self, plan: JobPlan) -> dict[str, Any]:
        """What the user runs before submitting: ``fluence select`` (or a coin)."""
        quantum = plan.quantum
        assert quantum is not None and plan.policy is not None
        candidates = select.gather(self.config, quantum.type, [self.provider])
        if plan.policy == RANDOM_POLICY:
            rng = stable_rng(self.seed, plan.id, "random-policy")
            backend, info = candidates[rng.randrange(len(candidates))]
            chosen = select.Candidate(backend, info, info.cost(quantum.shots))
            selection = select.Selection(chosen, [chosen], select.Policy((), text=RANDOM_POLICY),
                                         quantum.type, quantum.shots)
        else:
            selection = select.rank(
                candidates, select.Policy.parse(plan.policy), quantum.shots, quantum.type
            )
        record = selection.record()
        record["_selection"] = selection
        return record

    def _create_attempt(self, job: JobState) -> None:
        for index in range(job.plan.size):
            self._create_pod(job, index, job.attempt)

    def _create_pod(self, job: JobState, index: int, attempt: int) -> None:
        if attempt != job.attempt or job.done_at is not None:
            return
        plan = job.plan
        name = f"{plan.id}-{index}" if attempt == 0 else f"{plan.id}-r{attempt}-{index}"
        manifest = self._manifest(job, index, name)
        admitted = self._admit(manifest)
        if isinstance(admitted, str):
            job.refusals += 1
            logger.info("sim: admission refused %s: %s", name, admitted)
            self.engine.after(ADMISSION_RETRY, self._create_pod, job, index, attempt)
            return
        created = self.cluster.create(PODS, admitted, NAMESPACE)
        self.service.controller.pod_stored("ADDED", created)  # its PodGroup, as the webhook's
        record = PodRecord(
            name, plan.id, index, attempt, uid=created["metadata"]["uid"], created=self.engine.now
        )
        self.records[name] = record
        job.pods[index] = record

    def _manifest(self, job: JobState, index: int, name: str) -> KubeObject:
        plan = job.plan
        fluence = self.arm in ("fluence", "gang-ungated")
        labels = {
            names.GROUP_LABEL: plan.id,
            names.JOB_COMPLETION_INDEX: str(index),
            "app": plan.template,
        }
        annotations = {names.GROUP_SIZE_ANNOTATION: str(plan.size)}
        requests: dict[str, str] = {"cpu": plan.cpu, "memory": plan.memory}
        quantum = plan.quantum
        if quantum is not None:
            shared = self.arm == "fluence"
            if shared:
                annotations[names.COORDINATION_ANNOTATION] = names.COORDINATION_SHARED
            asks = shared or index == 0  # natively only the pod that submits asks for it
            if asks and not quantum.claim:
                requests[names.extended_resource(quantum.type)] = "1"
            if quantum.backend and not quantum.claim:  # a claim pins it by its selector
                annotations[names.REQUIRE_BACKEND_ANNOTATION] = quantum.backend
        limits = {k: v for k, v in requests.items() if names.virtual_type_of(k)}
        pod: KubeObject = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": labels,
                "annotations": annotations,
                # one Indexed Job's pods, as on a cluster: a scout releases only its siblings
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": plan.id,
                                     "uid": f"sim-job-{plan.id}",
                                     "controller": True}],
            },
            "spec": {
                "schedulerName": names.SCHEDULER_NAME if fluence else DEFAULT_SCHEDULER,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "app",
                        "image": f"sim/{plan.template}",
                        "resources": {
                            "requests": requests,
                            **({"limits": limits} if limits else {}),
                        },
                    }
                ],
            },
        }
        if quantum is not None and quantum.claim and (self.arm == "fluence" or index == 0):
            pod["spec"]["resourceClaims"] = [{"name": "qpu",
                                              "resourceClaimName": self._claim_name(job)}]
            pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "qpu"}]
        elif job.selection is not None:
            select.annotate_manifest(pod, job.selection["_selection"])
        return pod

    def _admit(self, pod: KubeObject) -> KubeObject | str:
        """The API server's admission step: one AdmissionReview through the real service."""
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": f"sim-{pod['metadata']['name']}", "operation": "CREATE",
                              "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "resource": {"group": "", "version": "v1", "resource": "pods"},
                              "namespace": NAMESPACE, "object": pod}}
        outcome = self.service.review(json.dumps(review).encode())
        response = outcome.response
        if not response.get("allowed"):
            return str((response.get("status") or {}).get("message") or "refused")
        if response.get("patch"):
            from fluence_core.kube.patch import apply_patch

            apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
        return pod

    # -- the kubelet and the applications -------------------------------------------------

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
            status["startTime"] = self._stamp().strftime("%Y-%m-%dT%H:%M:%SZ")
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
        for record in job.pods.values():
            record.killed = True
            record.finished_at = self.engine.now
            job.history.append(record)
            try:
                self.cluster.delete(PODS, record.name, NAMESPACE)
            except ApiError:
                pass
        job.pods = {}
        job.all_bound = None
        job.attempt += 1
        self.engine.after(self.scenario.lifecycle.restart_delay, self._create_attempt, job)

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
        settings = settings_from_env(env, sidecar_poll_interval=self.settings.sidecar_poll_interval,
                                     ungate_position=self.settings.ungate_position,
                                     find_task_timeout=self.settings.find_task_timeout)
        attributes = attributes_from_env(env)
        provider = resolve_provider(attributes, [self.provider])
        config = dataclasses.replace(
            SidecarConfig.from_settings(settings, Backend.from_attributes(attributes)),
            runtime_dir=None,
        )
        # Its reports are applied in process, with Fluence's own settings (the gate).
        fluence = LocalReporter(self.cluster, config.namespace, config.pod_name,
                                self.settings.quantum_gate)
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
            self._remaining -= 1
            if job.plan.quantum is not None and job.plan.quantum.claim:
                # the Job's owner deletes the claim with it: the backend is free again
                self.cluster.delete(RESOURCE_CLAIMS, self._claim_name(job), NAMESPACE)

    # -- what happened -------------------------------------------------------------------

    def job_metrics(self) -> list[dict[str, Any]]:
        """One row per job: waits, idle node-seconds, restarts, and for hybrid jobs the task."""
        rows = []
        for job in self.jobs.values():
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
                    until = self.engine.now  # still waiting when the run ended
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

    def run_metrics(self) -> dict[str, Any]:
        done = [j.done_at for j in self.jobs.values() if j.done_at is not None]
        first = min((p.arrival for p in self.plans), default=0.0)
        pods = sum(1 for r in self.records.values() if r.bound_at is not None)
        return {"arm": self.arm, "jobs": len(self.jobs), "jobs_done": len(done),
                "pods_created": len(self.records), "pods_placed": pods,
                "makespan": (max(done) - first) if done else None, "end": self.engine.now,
                "events": self.engine.events, "cycles": self.cycles}
