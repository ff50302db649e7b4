"""Reading a Job or JobSet as a Flux workload: opt-in, the pod template, hosts, settings.

Everything the handler needs is computed here from the object alone, and an
object Flux cannot run in is refused with a message that says what to change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluence_core.api import (
    AdmissionDenied,
    annotations_of,
    labels_of,
    metadata_of,
    names,
    owner_references_of,
    positive_int_annotation,
)

JOB_KIND = "Job"
JOBSET_KIND = "JobSet"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
TRAINER_NODE_JOB = "node"
"""The replicated job Kubeflow Trainer runs the training on (its runtimes' usual name)."""
TRAINER_JOB = "trainer"
"""The same job by its step name, which some runtimes also use as the job's name."""
TRAINER_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""Trainer's label on a replicated job template: which step of the TrainJob it runs."""

QUEUE_POLICIES = ("fcfs", "easy", "hybrid", "conservative")
DEFAULT_QUEUE_POLICY = "fcfs"
DEFAULT_NETWORK_DEVICE = "eth0"
DEFAULT_TASKS_PER_NODE = 1
_DEVICE = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_HOSTNAME = 63


@dataclass(frozen=True)
class TrainerSize:
    """The sizes a Kubeflow TrainJob and its runtime give; None where neither says."""

    nodes: int | None
    tasks_per_node: int | None


@dataclass(frozen=True)
class FluxWorkload:
    """One Job or JobSet made into a Flux instance of ``nodes`` brokers."""

    kind: str
    api_version: str
    name: str
    namespace: str
    job_path: tuple[str | int, ...]
    """Path parts of the Job spec (completions, parallelism) inside the object."""
    job_spec: Mapping[str, Any]
    template_path: tuple[str | int, ...]
    """Path parts of the pod template (``metadata`` + ``spec``) inside the object."""
    template: Mapping[str, Any]
    nodes: int
    host_prefix: str
    """Hostname of rank r is ``host_prefix + str(r)``."""
    subdomain: str
    selector: Mapping[str, str]
    """Labels every pod of the instance carries (Service selector, anti-affinity)."""
    container_index: int
    argv: tuple[str, ...]
    tasks_per_node: int
    queue_policy: str
    network_device: str

    @property
    def hosts(self) -> str:
        """Flux hostlist of every broker, rank order (``job-[0-3]``)."""
        if self.nodes == 1:
            return f"{self.host_prefix}0"
        return f"{self.host_prefix}[0-{self.nodes - 1}]"

    @property
    def config_map(self) -> str:
        return f"{self.name}-flux"

    @property
    def secret(self) -> str:
        return f"{self.name}-flux-curve"

    @property
    def owns_service(self) -> bool:
        """Jobs get a Service from the handler; the JobSet controller makes its own."""
        return self.kind == JOB_KIND

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def kind_of(obj: Mapping[str, Any]) -> str:
    kind = str(obj.get("kind") or "")
    if not kind:
        api = str(obj.get("apiVersion") or "")
        kind = JOBSET_KIND if api.startswith("jobset.x-k8s.io/") else JOB_KIND
    return kind


def trainer_owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The TrainJob owner reference of a JobSet Kubeflow Trainer made, if any."""
    for ref in owner_references_of(obj):
        if ref.get("kind") == "TrainJob" and str(ref.get("apiVersion", "")).startswith(
                "trainer.kubeflow.org/"):
            return ref
    return None


def _trainer_label(obj: Mapping[str, Any]) -> bool:
    if labels_of(obj).get(names.TRAINER_FRAMEWORK_LABEL) == names.TRAINER_FRAMEWORK_FLUX:
        return True
    for job in (obj.get("spec") or {}).get("replicatedJobs") or []:
        template_labels = labels_of(job.get("template") or {})
        if template_labels.get(names.TRAINER_FRAMEWORK_LABEL) == names.TRAINER_FRAMEWORK_FLUX:
            return True
    return False


def opted_in(obj: Mapping[str, Any]) -> bool:
    """Asked for Flux without a cluster read: the annotation, or Trainer's label on a JobSet."""
    if str(annotations_of(obj).get(names.FLUX_ANNOTATION, "")).lower() == "true":
        return True
    return kind_of(obj) == JOBSET_KIND and _trainer_label(obj)


def _int_setting(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = positive_int_annotation(obj, key)
    return default if value is None else value


def _choice(obj: Mapping[str, Any], key: str, default: str, allowed: tuple[str, ...]) -> str:
    value = str(annotations_of(obj).get(key) or default).strip().lower()
    if value not in allowed:
        raise AdmissionDenied(f"{key}={value!r} must be one of {', '.join(allowed)}")
    return value


def _device(obj: Mapping[str, Any]) -> str:
    value = str(
        annotations_of(obj).get(names.FLUX_NETWORK_DEVICE_ANNOTATION) or DEFAULT_NETWORK_DEVICE
    )
    if not _DEVICE.match(value):
        raise AdmissionDenied(
            f"{names.FLUX_NETWORK_DEVICE_ANNOTATION}={value!r} is not an interface name"
        )
    return value


def _indexed(job_spec: Mapping[str, Any], what: str, trainer: TrainerSize | None) -> int:
    """The node count of an Indexed Job spec whose parallelism equals its completions.

    For a Kubeflow Trainer JobSet (``trainer`` given) the count is Trainer's
    ``numNodes``, else the job's own completions or parallelism, else 1, and
    the handler makes the Job spec Indexed with that many completions itself.
    """
    if trainer is not None:
        if trainer.nodes is not None:
            return trainer.nodes
        for key in ("completions", "parallelism"):
            value = job_spec.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
                return value
        return 1
    if job_spec.get("completionMode") != "Indexed":
        raise AdmissionDenied(f"{what} must be an Indexed Job (spec.completionMode: Indexed): "
                              "Flux ranks are the completion indexes")
    completions = job_spec.get("completions")
    parallelism = job_spec.get("parallelism", 1)
    if not isinstance(completions, int) or completions < 1:
        raise AdmissionDenied(f"{what} needs spec.completions (the number of Flux nodes)")
    if parallelism != completions:
        raise AdmissionDenied(
            f"{what} has parallelism {parallelism} but completions {completions}: "
            "every broker must run at once, set them equal"
        )
    return completions


def _container(
    template: Mapping[str, Any], obj: Mapping[str, Any], what: str
) -> tuple[int, tuple[str, ...]]:
    containers = list((template.get("spec") or {}).get("containers") or [])
    if not containers:
        raise AdmissionDenied(f"{what} has no containers")
    wanted = annotations_of(obj).get(names.FLUX_CONTAINER_ANNOTATION)
    if wanted:
        matches = [i for i, c in enumerate(containers) if c.get("name") == wanted]
        if not matches:
            raise AdmissionDenied(
                f"{names.FLUX_CONTAINER_ANNOTATION}={wanted!r} names no container of {what}"
            )
        index = matches[0]
    else:
        index = 0
    container = containers[index]
    command = list(container.get("command") or [])
    args = list(container.get("args") or [])
    if not command:
        raise AdmissionDenied(
            f"container {container.get('name')!r} of {what} has no command: "
            "Flux must know what to run and cannot read the image's ENTRYPOINT; "
            "write the full command in spec.containers[].command"
        )
    argv = command + args
    if not all(isinstance(part, str) and part for part in argv):
        raise AdmissionDenied(f"container {container.get('name')!r} of {what} has an empty or "
                              "non-string command part")
    return index, tuple(argv)


def _flux_job(jobs: list[Mapping[str, Any]], what: str) -> int:
    """Which replicated job of a JobSet runs Flux: the only one, or Trainer's trainer step."""
    if len(jobs) == 1:
        return 0
    for i, job in enumerate(jobs):
        job_labels = labels_of(job.get("template") or {})
        if job_labels.get(TRAINER_STEP_LABEL) == TRAINER_JOB:
            return i
    for i, job in enumerate(jobs):
        if job.get("name") in (TRAINER_NODE_JOB, TRAINER_JOB):
            return i
    raise AdmissionDenied(f"{what} has {len(jobs)} replicated jobs and none is the trainer "
                          f"(named {TRAINER_NODE_JOB!r} or {TRAINER_JOB!r}, or labelled "
                          f"{TRAINER_STEP_LABEL}={TRAINER_JOB}): say which one runs Flux")


def read(obj: Mapping[str, Any], namespace: str, *,
         trainer: TrainerSize | None = None) -> FluxWorkload:
    """The workload an opted-in Job or JobSet describes, or :class:`AdmissionDenied`.

    ``trainer`` is given for a TrainJob's JobSet; without it the Job spec must
    already be Indexed with parallelism = completions.
    """
    kind = kind_of(obj)
    meta = metadata_of(obj)
    name = str(meta.get("name") or "")
    what = f"{kind} {namespace}/{name or meta.get('generateName', '') + '*'}"
    if not name:
        raise AdmissionDenied(f"{what}: Flux needs a named {kind} (not generateName), "
                              "the brokers' hostnames and Service derive from the name")
    spec = obj.get("spec") or {}
    if kind == JOB_KIND:
        job_spec = spec
        count = _indexed(spec, what, None)
        template = spec.get("template") or {}
        job_path = ("spec",)
        template_path = ("spec", "template")
        subdomain = str((template.get("spec") or {}).get("subdomain") or name)
        host_prefix = f"{name}-"
        selector = {names.JOB_NAME_LABEL: name}
    elif kind == JOBSET_KIND:
        jobs = list(spec.get("replicatedJobs") or [])
        index = _flux_job(jobs, what)
        job = jobs[index]
        job_name = str(job.get("name") or "")
        if job.get("replicas", 1) != 1:
            raise AdmissionDenied(f"replicated job {job_name!r} of {what} has replicas "
                                  f"{job.get('replicas')}: one Flux instance needs replicas 1 "
                                  "(use parallelism/completions for the node count)")
        job_spec = (job.get("template") or {}).get("spec") or {}
        count = _indexed(job_spec, f"replicated job {job_name!r} of {what}", trainer)
        template = job_spec.get("template") or {}
        job_path: tuple[str | int, ...] = ("spec", "replicatedJobs", index, "template", "spec")
        template_path = (*job_path, "template")
        subdomain = str((spec.get("network") or {}).get("subdomain") or name)
        host_prefix = f"{name}-{job_name}-0-"
        selector = {JOBSET_NAME_LABEL: name}
    else:
        raise AdmissionDenied(f"{what}: Flux runs in batch/v1 Jobs and JobSets only")
    longest = f"{host_prefix}{count - 1}"
    if len(longest) > MAX_HOSTNAME or not _DNS_LABEL.match(longest):
        raise AdmissionDenied(f"{what}: hostname {longest!r} is not a DNS label of at most "
                              f"{MAX_HOSTNAME} characters; shorten the name")
    if not _DNS_LABEL.match(subdomain):
        raise AdmissionDenied(f"{what}: subdomain {subdomain!r} is not a DNS label")
    container_index, argv = _container(template, obj, what)
    return FluxWorkload(
        kind=kind,
        api_version=str(obj.get("apiVersion") or ""),
        name=name,
        namespace=namespace,
        job_path=job_path,
        job_spec=job_spec,
        template_path=template_path,
        template=template,
        nodes=count,
        host_prefix=host_prefix,
        subdomain=subdomain,
        selector=selector,
        container_index=container_index,
        argv=argv,
        tasks_per_node=_int_setting(
            obj, names.FLUX_TASKS_PER_NODE_ANNOTATION, DEFAULT_TASKS_PER_NODE
        ),
        queue_policy=_choice(
            obj, names.FLUX_QUEUE_POLICY_ANNOTATION, DEFAULT_QUEUE_POLICY, QUEUE_POLICIES
        ),
        network_device=_device(obj),
    )
