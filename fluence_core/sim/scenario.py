"""Scenario files for ``fluence sim``: the cluster, the vendors, the workload, the arms.

A scenario is one YAML file, validated as a whole before anything runs; every error
names the file and the field (``workload[2].sizes``), like the resources config, because
a simulation that fails halfway wastes the run. :class:`Scenario` shows the schema.

Nothing in a scenario says how an arm behaves: arms differ only by which scheduler and
which admission path the same pods go through.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fluence_core import limits, yamlfile
from fluence_core.errors import FluenceError
from fluence_core.quantity import cpu_cores, memory_mib
from fluence_core.runtime.select import Policy

ARMS = ("fluence", "first-fit", "gang-ungated")
"""``fluence``: the real scheduler, webhook split and sidecar; ``first-fit``: per-pod,
no gangs (kube-scheduler's default shape); ``gang-ungated``: all-or-nothing gangs,
no gate (native gang scheduling)."""
Arm = Literal["fluence", "first-fit", "gang-ungated"]
_DEFAULT_ARMS: tuple[Arm, ...] = ("fluence", "first-fit")
_FILE_NAME = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
"""A name that is safe as a file name and a graph path segment: no '/', no '..' alone."""
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
EXPERIMENTS = ("workload", "gang-contention", "two-queue", "selection")
RANDOM_POLICY = "random"


class ScenarioError(FluenceError):
    """A scenario file that cannot run; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(_Model):
    """Seconds drawn uniformly from ``[min, max]``; a bare number means exactly that."""

    min: float = Field(ge=0)
    max: float = Field(ge=0)

    @model_validator(mode="before")
    @classmethod
    def _scalar(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"min": value, "max": value}
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


class NodeGroup(_Model):
    count: int = Field(default=1, ge=1, le=limits.MAX_SIM_NODES)
    cpu: int = Field(default=4, ge=1, le=limits.MAX_NODE_CORES)
    memory: str = "16Gi"
    prefix: str = Field(default="node", pattern=_DNS_LABEL, max_length=40)

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        memory_mib(value)
        return value
    labels: dict[str, str] = Field(default_factory=dict)


class ClusterSpec(_Model):
    nodes: list[NodeGroup] = Field(default_factory=lambda: [NodeGroup(count=4)])

    @field_validator("nodes")
    @classmethod
    def _unique_prefixes(cls, groups: list[NodeGroup]) -> list[NodeGroup]:
        prefixes = [g.prefix for g in groups]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError(f"node groups need distinct prefixes, got {prefixes}")
        return groups


class Lifecycle(_Model):
    startup: Range = Range(min=2, max=8)
    """Bound -> Running (image pull, container start), per pod."""
    peer_timeout: float = Field(default=600, gt=0)
    """A gang member running this long without its peers fails the gang's attempt (MPI
    launcher timeout); its Job recreates every member after ``restart_delay``."""
    restart_delay: float = Field(default=10, ge=0)
    scheduler_period: float = Field(default=1.0, gt=0)
    """At most one scheduling cycle per this many virtual seconds (both arms)."""
    delete_finished: bool = False
    """Delete pods once finished (a Job's TTL), keeping large runs' caches small."""


class SidecarSpec(_Model):
    poll_interval: float = Field(default=5.0, gt=0)
    ungate_position: int = Field(default=1, ge=0)
    find_timeout: float = Field(default=600.0, ge=0)


class Outages(_Model):
    every: float = Field(gt=0, description="mean seconds between outages")
    duration: Range


class BackendModel(_Model):
    """One vendor queue: background depth, service, prices, outages."""

    type: str = "qpu"
    provider: str = "braket"
    depth: float = Field(default=0, ge=0)
    """Mean number of tasks ahead of a new one (exponentially distributed, resampled
    every ``depth_period`` seconds)."""
    depth_period: float = Field(default=600, gt=0)
    service: Range = Range(min=1, max=1)
    """Seconds each task ahead takes."""
    task_overhead: float = Field(default=1.0, ge=0)
    shot_time: float = Field(default=0.0, ge=0)
    """Our own task runs ``task_overhead + shots * shot_time`` seconds."""
    price_per_task: float = Field(default=0.0, ge=0)
    price_per_shot: float = Field(default=0.0, ge=0)
    qubits: int = Field(default=0, ge=0)
    slots: int = Field(default=8, ge=1)
    """Groups the scheduler may hold on this backend at once (its vertex count)."""
    failure_rate: float = Field(default=0.0, ge=0, le=1)
    outages: Outages | None = None


class QuantumSpec(_Model):
    type: str = "qpu"
    backend: str | None = None
    """Pinned backend (``require-backend``); the baselines' apps use it too."""
    shots: int = Field(default=1000, ge=1)
    claim: bool = False
    """Ask for the backend through a ResourceClaim of the QPU driver's class (the pods name
    one claim per job) instead of the extended resource."""


class JobSpec(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=30)
    size: int | None = Field(default=None, ge=1)
    sizes: list[int] | None = None
    count: int = Field(default=1, ge=1)
    shuffle: bool = False
    arrive: Range | dict[str, float] = Field(default_factory=lambda: {"start": 0.0, "every": 0.0})
    cpu: str = "1"
    memory: str = "1Gi"
    runtime: Range = Range(min=60, max=60)
    quantum: QuantumSpec | None = None

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return (
            str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        )

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        cpu_cores(value)
        return value

    @field_validator("sizes")
    @classmethod
    def _positive(cls, sizes: list[int] | None) -> list[int] | None:
        if sizes is not None and (not sizes or any(s < 1 for s in sizes)):
            raise ValueError(f"sizes must be a non-empty list of positive integers, got {sizes}")
        return sizes

    @field_validator("arrive")
    @classmethod
    def _arrival(cls, value: Range | dict[str, float]) -> Range | dict[str, float]:
        if isinstance(value, dict):
            unknown = set(value) - {"start", "every"}
            if unknown:
                raise ValueError(f"unknown keys {sorted(unknown)} (use start/every, or min/max)")
            if any(v < 0 for v in value.values()):
                raise ValueError("start and every must be >= 0")
        return value

    @model_validator(mode="after")
    def _one_size(self) -> JobSpec:
        if (self.size is None) == (self.sizes is None):
            raise ValueError("give exactly one of 'size' or 'sizes'")
        return self

    @property
    def gang_sizes(self) -> list[int]:
        return [s for s in (self.sizes or [self.size or 1]) for _ in range(self.count)]


class Sweep(_Model):
    backends: list[str] = Field(min_length=1)
    sizes: list[int] = Field(min_length=1)


class Scenario(_Model):
    """A whole scenario file. Schema (every key but ``name`` has a default)::

        name: gang-contention
        description: one line for the table title
        experiment: workload | gang-contention | two-queue | selection
        seed: 7
        schedulers: [fluence, first-fit]        # the arms (first-fit, gang-ungated: baselines)
        policies: [random, min-cost, min-queue] # selection only: how the user picks a backend
        repeats: 1                              # fresh runs per cell (paired across arms)
        cluster:
          nodes: [{count: 4, cpu: 4, memory: 16Gi}]
        lifecycle:  {startup: {min: 2, max: 8}, peer_timeout: 600, restart_delay: 10,
                     scheduler_period: 1, delete_finished: false}
        sidecar:    {poll_interval: 5, ungate_position: 1}
        backends:                               # one vendor queue model each
          sv1: {type: qpu, depth: 1, service: {min: 2, max: 8}, shot_time: 0.002, ...}
        workload:
          - name: lammps
            sizes: [1, 2, 4]                    # gang sizes; `count` gangs of each
            count: 3
            shuffle: true                       # arrival order shuffled (per repeat)
            arrive: {start: 0, every: 1}
            cpu: 3
            memory: 1Gi
            runtime: {min: 60, max: 90}         # the application's run time, seconds
            quantum: {type: qpu, backend: sv1, shots: 1000}   # hybrid: one task per gang
                                                # (claim: true: the backend asked for by claim)
        sweep: {backends: [sv1, dm1], sizes: [2, 4, 8]}       # two-queue only
    """

    name: str = Field(pattern=_FILE_NAME, max_length=100)
    """Also the output files' name (``<name>.json``), so it may not hold a path."""
    description: str = ""
    experiment: Literal["workload", "gang-contention", "two-queue", "selection"] = "workload"
    seed: int = 1
    schedulers: list[Arm] = Field(default_factory=lambda: list(_DEFAULT_ARMS), min_length=1)
    policies: list[str] = Field(default_factory=list)
    repeats: int = Field(default=1, ge=1, le=limits.MAX_SIM_REPEATS)
    horizon: float = Field(default=7 * 86400, gt=0)
    cluster: ClusterSpec = ClusterSpec()
    lifecycle: Lifecycle = Lifecycle()
    sidecar: SidecarSpec = SidecarSpec()
    backends: dict[str, BackendModel] = Field(default_factory=dict)
    workload: list[JobSpec] = Field(default_factory=list)
    sweep: Sweep | None = None
    source: str = Field(default="<scenario>", exclude=True)

    @field_validator("policies")
    @classmethod
    def _policies(cls, policies: list[str]) -> list[str]:
        for text in policies:
            if text != RANDOM_POLICY:
                try:
                    Policy.parse(text)
                except FluenceError as error:
                    raise ValueError(str(error)) from None
        return policies

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        for i, job in enumerate(self.workload):
            quantum = job.quantum
            if quantum is None:
                continue
            if quantum.backend is not None and quantum.backend not in self.backends:
                raise ValueError(
                    f"workload[{i}].quantum.backend: {quantum.backend!r} is not one of "
                    f"the backends {sorted(self.backends)}"
                )
            if not any(b.type == quantum.type for b in self.backends.values()):
                raise ValueError(f"workload[{i}].quantum.type: no backend serves {quantum.type!r}")
            if quantum.claim and "first-fit" in self.schedulers:
                raise ValueError(f"workload[{i}].quantum.claim: the first-fit arm allocates no "
                                 "claims; use the fluence and gang-ungated arms")
        nodes = sum(group.count for group in self.cluster.nodes)
        if nodes > limits.MAX_SIM_NODES:
            raise ValueError(f"cluster.nodes: {nodes} nodes in all; the limit is"
                             f" {limits.MAX_SIM_NODES}")
        pods = sum(sum(job.gang_sizes) for job in self.workload)
        if pods > limits.MAX_SIM_PODS:
            raise ValueError(f"workload: {pods} pods in all (sizes x count); the limit is"
                             f" {limits.MAX_SIM_PODS}")
        for name in self.backends:
            if not re.fullmatch(_FILE_NAME, name) or len(name) > 63:
                raise ValueError(f"backends: {name[:80]!r} must be at most 63 letters, digits,"
                                 " '-', '_' and '.', starting and ending with a letter or digit")
        names = [j.name for j in self.workload]
        if len(set(names)) != len(names):
            raise ValueError(f"workload: job names must be distinct, got {names}")
        if self.experiment == "two-queue":
            if self.sweep is None:
                raise ValueError(
                    "sweep: a two-queue experiment needs sweep.backends and sweep.sizes"
                )
            unknown = [b for b in self.sweep.backends if b not in self.backends]
            if unknown:
                raise ValueError(
                    f"sweep.backends: {unknown} are not among the backends {sorted(self.backends)}"
                )
            if len(self.workload) != 1 or self.workload[0].quantum is None:
                raise ValueError(
                    "workload: a two-queue experiment takes exactly one quantum job template"
                )
        if self.experiment == "selection":
            if not self.policies:
                raise ValueError("policies: a selection experiment needs at least one policy")
            if not any(j.quantum is not None for j in self.workload):
                raise ValueError("workload: a selection experiment needs a quantum job")
        elif self.experiment != "two-queue" and not self.workload:
            raise ValueError("workload: at least one job is needed")
        return self


def _where(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text or "(top level)"


def parse_scenario(text: str, source: str = "<string>") -> Scenario:
    """Validate a scenario's YAML text; a :class:`ScenarioError` names ``source`` and the field."""
    try:
        document = yamlfile.load(text)
    except yaml.YAMLError as error:
        raise ScenarioError(f"{source}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise ScenarioError(f"{source}: expected a mapping (name, cluster, workload, ...)")
    document.pop("source", None)
    try:
        scenario = Scenario.model_validate(document)
    except ValidationError as error:
        problems = []
        for problem in error.errors():
            loc = tuple(
                p for p in problem["loc"] if not (isinstance(p, str) and p.startswith("function-"))
            )
            message = problem["msg"].removeprefix("Value error, ")
            problems.append(f"{_where(loc)}: {message}")
        raise ScenarioError(f"{source}: " + "; ".join(problems)) from None
    return scenario.model_copy(update={"source": source})


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario file."""
    try:
        text = yamlfile.read_text(path)
    except FluenceError as error:
        raise ScenarioError(str(error)) from None
    return parse_scenario(text, str(path))


def resources_yaml(scenario: Scenario) -> str:
    """The resources.yaml the scheduler loads: one qdevice per backend, ``slots`` of its type."""
    resources = []
    for name, model in scenario.backends.items():
        attributes = {"provider": model.provider, "price-per-task": model.price_per_task,
                      "price-per-shot": model.price_per_shot}
        child: dict[str, Any] = {"type": model.type, "count": model.slots}
        if model.qubits:
            child["with"] = [{"type": "qubit", "count": model.qubits}]
        resources.append(
            {"type": "qdevice", "name": name, "attributes": attributes, "with": [child]}
        )
    text: str = yaml.safe_dump({"resources": resources}, sort_keys=False)
    return text
