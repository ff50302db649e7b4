"""The simulated Job controller, and the records of what happens to each job and pod.

A job is a gang of pods created at once, each through the webhook's real admission
(:meth:`AdmissionService.review <fluence_core.webhook.admission.review.AdmissionService.review>`,
what the HTTPS server calls); a pod admission refuses is tried again after
:data:`ADMISSION_RETRY` seconds, and an attempt whose launcher gave up waiting for its
peers is deleted and made again, as an Indexed Job's controller would. A hybrid job's
user first runs ``fluence select`` (or a coin) to choose its backend.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from fluence_core import names
from fluence_core.hybrid.sidecar import SidecarResult
from fluence_core.kube.api import PODS, RESOURCE_CLAIMS, KubeObject
from fluence_core.kube.errors import ApiError
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.patch import apply_patch
from fluence_core.log import logger
from fluence_core.resource_config import ResourceConfig
from fluence_core.runtime import select
from fluence_core.sim.baseline import DEFAULT_SCHEDULER
from fluence_core.sim.engine import Engine
from fluence_core.sim.qpu_claims import job_claim
from fluence_core.sim.scenario import RANDOM_POLICY, QuantumSpec, Scenario
from fluence_core.sim.vendor import SimQueueProvider, SimTask, stable_rng
from fluence_core.webhook.admission.review import AdmissionService

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



def claim_name(job: JobState) -> str:
    """The ResourceClaim a job asking for its QPU by claim shares among its pods."""
    return f"{job.plan.id}-qpu"


class JobController:
    """Creates each job's pods through admission, and a failed attempt's again."""

    def __init__(self, *, engine: Engine, cluster: FakeCluster, service: AdmissionService,
                 config: ResourceConfig, provider: SimQueueProvider, scenario: Scenario,
                 arm: str, seed: object, jobs: dict[str, JobState],
                 records: dict[str, PodRecord]) -> None:
        self.engine = engine
        self.cluster = cluster
        self.service = service
        self.config = config
        self.provider = provider
        self.scenario = scenario
        self.arm = arm
        self.seed = seed
        self.jobs = jobs
        self.records = records

    def arrive(self, plan: JobPlan) -> None:
        """A job is submitted: its backend chosen (a hybrid job with a policy), its pods made."""
        job = self.jobs[plan.id]
        if plan.quantum is not None and plan.policy is not None:
            job.selection = self._select(plan)
        if plan.quantum is not None and plan.quantum.claim:
            picked = job.selection["_selection"].chosen if job.selection else None
            chosen = picked.backend.name if picked is not None else plan.quantum.backend
            self.cluster.create(RESOURCE_CLAIMS, job_claim(
                claim_name(job), plan.quantum.type, chosen), NAMESPACE)
        self.create_attempt(job)

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

    def create_attempt(self, job: JobState) -> None:
        """Create every pod of the job's current attempt."""
        for index in range(job.plan.size):
            self._create_pod(job, index, job.attempt)

    def retry(self, job: JobState) -> None:
        """The attempt failed: delete its pods and make the next attempt after the scenario's
        restart delay."""
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
        self.engine.after(self.scenario.lifecycle.restart_delay, self.create_attempt, job)

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
                                              "resourceClaimName": claim_name(job)}]
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
            apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
        return pod
