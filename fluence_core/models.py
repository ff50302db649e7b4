"""Plain objects the graph and placement work on, read from Kubernetes dicts.

Everything past the Kubernetes wrapper takes these, never client objects, so the
core can be exercised with YAML files, the simulator or a real API server alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from fluence_core import limits, names
from fluence_core.kube.api import KubeObject
from fluence_core.numa import NodeNuma
from fluence_core.pod_requests import CPU, MEMORY, is_guaranteed, pod_requests
from fluence_core.quantity import MIB, cpu_cores, memory_mib
from fluence_core.topology import NONE as NO_CONSTRAINT
from fluence_core.topology import Constraint

_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` if it is a mapping (absent reads as empty); else an error naming ``where``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} is not a mapping")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where} is not a list")
    return value


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodeInfo:
    """What the graph needs of a Kubernetes Node."""

    name: str
    cores: int
    memory_mib: int
    gpus: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    max_pods: int = 0
    """Allocatable ``pods``: how many pods the kubelet admits (0 = not said)."""
    millicores: int = 0
    """Allocatable CPU in millicores, as the kubelet counts it (0: ``cores`` x 1000)."""
    numa: NodeNuma | None = None
    """Its NUMA zones, from its NodeResourceTopology (:mod:`fluence_core.numa`), if any."""

    @property
    def schedulable(self) -> bool:
        """Cordoned nodes and NoSchedule/NoExecute-tainted nodes take no new pods."""
        return not self.unschedulable and not any(
            t.effect in _BLOCKING_EFFECTS for t in self.taints
        )

    @classmethod
    def from_kube(cls, node: KubeObject) -> "NodeInfo":
        metadata = _mapping(node.get("metadata"), "Node metadata")
        name = metadata.get("name")
        if not name:
            raise ValueError("a Node without metadata.name")
        if not isinstance(name, str):
            raise ValueError(f"a Node's metadata.name must be a string, got {name!r:.40}")
        try:
            spec = _mapping(node.get("spec"), "spec")
            status = _mapping(node.get("status"), "status")
            allocatable = _mapping(
                status.get("allocatable") or status.get("capacity"), "status.allocatable"
            )
            labels = _mapping(metadata.get("labels"), "metadata.labels")
            raw_taints = _list(spec.get("taints"), "spec.taints")
            if not all(isinstance(t, Mapping) for t in raw_taints):
                raise ValueError("spec.taints has an entry that is not a mapping")
        except ValueError as error:
            raise ValueError(f"node {name}: {error}") from None
        try:
            millicores = math.ceil(cpu_cores(allocatable.get("cpu", 0)) * 1000)
            cores = millicores // 1000
            memory = math.floor(memory_mib(allocatable.get("memory", 0)))
            gpus = math.floor(cpu_cores(allocatable.get(names.GPU_RESOURCE, 0)))
            max_pods = math.floor(cpu_cores(allocatable.get("pods", 0)))
        except ValueError as error:
            raise ValueError(f"node {name}: {error}") from None
        if cores > limits.MAX_NODE_CORES:
            raise ValueError(
                f"node {name}: cpu {cores} is more than Fluence's limit of"
                f" {limits.MAX_NODE_CORES} cores per node"
            )
        if gpus > limits.MAX_NODE_GPUS:
            raise ValueError(
                f"node {name}: {names.GPU_RESOURCE} {gpus} is more than Fluence's"
                f" limit of {limits.MAX_NODE_GPUS} per node"
            )
        taints = tuple(
            Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
            for t in raw_taints
        )
        return cls(
            name=name,
            cores=cores,
            memory_mib=memory,
            gpus=gpus,
            labels={str(k): str(v) for k, v in labels.items()},
            taints=taints,
            unschedulable=bool(spec.get("unschedulable", False)),
            max_pods=max_pods,
            millicores=millicores,
        )


@dataclass(frozen=True)
class PodRequest:
    """One pod's demand: whole cores, MiB of memory, GPUs, virtual types and pins.

    A pod asking for whole CPUs (or any GPU) holds ``cores`` exclusive cores. One asking
    for a fraction of a CPU, or none, is *shared*: ``cores`` is 0 and it draws
    ``millicores`` from its node's shared pool (see :mod:`fluence_core.matcher.pooled`).
    """

    name: str
    namespace: str = "default"
    cores: int = 1
    memory_mib: int = 0
    gpus: int = 0
    virtual: Mapping[str, int] = field(default_factory=dict)
    requires: Mapping[str, str] = field(default_factory=dict)
    uid: str = ""
    node_selector: tuple[tuple[str, str], ...] = ()
    """``spec.nodeSelector`` as sorted pairs: the pod goes only to nodes with these labels."""
    millicores: int | None = None
    """The CPU request exactly, in millicores (``None``: ``cores`` x 1000, whole cores)."""
    claims: tuple[str, ...] = ()
    """PersistentVolumeClaims its volumes use (``WaitForFirstConsumer`` ones learn its node)."""
    allowed: frozenset[str] | None = None
    """The nodes Kubernetes' filters let this pod use (:mod:`fluence_core.feasibility`);
    ``None`` when nobody asked them, and then only ``node_selector`` and cordons narrow it."""
    preferred: tuple[frozenset[str], ...] = ()
    """Preference tiers within ``allowed``, best first, each holding the one before
    (:mod:`fluence_core.feasibility.scoring`): the nodes the match tries first."""
    single_numa: bool = False
    """Its whole cores, GPUs and memory from one NUMA zone (annotation
    :data:`~fluence_core.names.SINGLE_NUMA_ANNOTATION`); a shared pod ignores it."""
    numa_aligned: bool = False
    """Guaranteed with whole CPUs: a kubelet under the ``single-numa-node`` policy admits it
    only inside one NUMA zone, so on such a node it is placed in one."""
    devices: tuple[str, int] | None = None
    """Its DRA claims as a device demand matched with its cores: (the demand's key, the
    devices it counts), set for one match (:mod:`fluence_core.dra.demands`)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shared(self) -> bool:
        """Draws from the node's shared pool instead of holding whole cores."""
        return self.millicores is not None and self.cores == 0

    @classmethod
    def from_kube(cls, pod: KubeObject) -> "PodRequest":
        """The pod's size (:func:`fluence_core.pod_requests.pod_requests`, kube-scheduler's
        rule) in the graph's terms, with its pins and node selector.

        CPU is read in millicores. The pod's *effective total* decides whole versus
        shared, because the graph holds one slot per pod: a whole number of CPUs (or
        any GPU, rounded up) means that many exclusive cores; anything else, even no
        request at all, is a share of the node's pool. Sidecars, an init container's
        peak, pod-level requests and the RuntimeClass's overhead are all in that total:
        a 2-cpu app with a 2-cpu sidecar holds 4 exclusive cores, one with a 500m
        sidecar (2500m) or a 250m overhead (2250m) draws from the pool. Either way the
        node is charged exactly what kube-scheduler charges it.
        """
        metadata = _mapping(pod.get("metadata"), "pod metadata")
        name = str(metadata.get("name") or metadata.get("generateName") or "pod")[:253]
        namespace = str(metadata.get("namespace") or "default")
        try:
            spec = _mapping(pod.get("spec"), "spec")
            annotations = _mapping(metadata.get("annotations"), "metadata.annotations")
            selector = _mapping(spec.get("nodeSelector"), "spec.nodeSelector")
        except ValueError as error:
            raise ValueError(f"pod {namespace}/{name}: {error}") from None
        totals = pod_requests(pod, f"pod {namespace}/{name}")
        virtual = {}
        for resource, amount in totals.items():
            vtype = names.virtual_type_of(resource)
            if vtype is not None and amount > 0:
                virtual[vtype] = amount
        millicores = totals.get(CPU, 0)
        gpus = totals.get(names.GPU_RESOURCE, 0)
        if millicores % 1000 == 0 and millicores or gpus:
            cores = max(1, math.ceil(millicores / 1000))
        else:
            cores = 0
        requires = {
            key[len(names.REQUIRE_ANNOTATION_PREFIX) :]: str(value)
            for key, value in annotations.items()
            if str(key).startswith(names.REQUIRE_ANNOTATION_PREFIX)
        }
        return cls(
            name=name,
            namespace=namespace,
            cores=cores,
            millicores=millicores,
            claims=volume_claims(spec, name),
            memory_mib=math.ceil(totals.get(MEMORY, 0) / MIB),
            gpus=gpus,
            virtual=virtual,
            requires=requires,
            node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
            uid=str(metadata.get("uid") or ""),
            single_numa=str(annotations.get(names.SINGLE_NUMA_ANNOTATION, "")).strip().lower()
            == "true",
            numa_aligned=cores > 0 and is_guaranteed(pod),
        )


def volume_claims(spec: Mapping[str, Any], pod_name: str) -> tuple[str, ...]:
    """Claim names of the pod's volumes; an ephemeral volume's claim is ``<pod>-<volume>``."""
    found = []
    for volume in spec.get("volumes") or ():
        if volume.get("persistentVolumeClaim"):
            found.append(str(volume["persistentVolumeClaim"].get("claimName") or ""))
        elif volume.get("ephemeral"):
            found.append(f"{pod_name}-{volume.get('name')}")
    return tuple(found)


@dataclass(frozen=True)
class Group:
    """Pods placed together, all or nothing (a group of one for a lone pod)."""

    name: str
    pods: tuple[PodRequest, ...]
    namespace: str = "default"
    topology: Constraint = NO_CONSTRAINT
    """What the group asks of the topology levels (fluence_core.topology)."""

    @property
    def virtual_types(self) -> list[str]:
        """Virtual types any member asks for, in first-seen order."""
        seen: dict[str, None] = {}
        for pod in self.pods:
            for vtype in pod.virtual:
                seen.setdefault(vtype, None)
        return list(seen)
