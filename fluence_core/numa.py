"""NUMA zones of a node, read from its NodeResourceTopology object.

Where nodes publish ``topology.node.k8s.io/v1alpha2`` NodeResourceTopology objects (the
NFD topology-updater does, one per node, named after it; scheduler-plugins'
NodeResourceTopologyMatch reads the same), each zone of type ``Node`` is a NUMA node
with its resources (``cpu``, ``memory``, ``nvidia.com/gpu``; ``allocatable``, else
``capacity``). The graph then hangs a node's cores, GPUs and memory under one
``numanode`` vertex per zone (:mod:`fluence_core.graph`), and a pod that must stay on one
NUMA node gets all of them from one zone.

The top-level attribute ``topologyManagerPolicy`` (or the older ``topologyPolicies``
list) says what the node's kubelet enforces: under ``single-numa-node`` the kubelet
refuses a Guaranteed pod whose whole CPUs do not fit one NUMA node, so such a pod must be
placed inside one zone there (:attr:`NodeNuma.single_numa_policy`).

**Counts.** A zone's whole CPUs and GPUs are what it reports allocatable; the node's own
allocatable is the truth for the totals, so zones are trimmed (from the last) or the
last one grows until they add up to the node's whole cores and GPUs. The node's memory
chunks are shared out in proportion to the memory each zone reports (the memory
manager's reserved memory makes zones unequal), so the totals stay the node's whatever
the zones add up to; where a zone reports no memory, chunks follow cores
(``memory_chunks_per_core`` each), as everywhere in the graph.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from fluence_core import names
from fluence_core.quantity import cpu_cores, memory_mib
from fluence_core.kube.meta import metadata_or_none

ZONE_TYPE: Final = "Node"
"""The NRT zone type of a NUMA node, as the NFD topology-updater publishes it."""
POLICY_ATTRIBUTE: Final = "topologyManagerPolicy"
SINGLE_NUMA_POLICY: Final = "single-numa-node"
OLD_SINGLE_NUMA_POLICIES: Final = frozenset({
    "SingleNUMANodeContainerLevel", "SingleNUMANodePodLevel"})
"""v1alpha1's ``topologyPolicies`` values for the same policy (deprecated in v1alpha2)."""


class ZoneLoad(str, Enum):
    """Which nodes' zones a graph written for Fluxion holds as ``numanode`` vertices.

    flux-sched places a jobspec's slot at the first vertex whose own children hold every
    type the slot asks for (``dfu_impl_t::slot_match``), and names nothing it may skip once
    matched: under a node with ``numanode`` vertices a slot of cores is always found under
    ONE of them, whatever the jobspec says. So a node whose zones are loaded keeps every
    whole-core pod inside one zone, and one whose zones are not loaded lets every pod span
    them. ``POLICY`` loads them where the kubelet enforces ``single-numa-node``, the nodes
    where that is what the kubelet admits anyway.
    """

    ALL = "all"
    """Every node that publishes zones."""
    POLICY = "policy"
    """Only nodes whose kubelet enforces ``single-numa-node``."""
    NONE = "none"
    """No node: every node is flat."""


@dataclass(frozen=True)
class NumaZone:
    """One NUMA node: its name, the whole CPUs and GPUs it reports allocatable, and its
    allocatable memory in MiB (None when it reports none)."""

    name: str
    cores: int
    gpus: int = 0
    memory_mib: int | None = None


@dataclass(frozen=True)
class NodeNuma:
    """What a node's NodeResourceTopology says: its zones, and its kubelet's policy."""

    zones: tuple[NumaZone, ...]
    single_numa_policy: bool = False


def read_nrt(obj: Mapping[str, Any]) -> NodeNuma:
    """The NUMA zones of a NodeResourceTopology object; raises ValueError naming the object
    and the field when it cannot be read."""
    meta = metadata_or_none(obj)
    name = meta.get("name") if meta is not None else None
    where = f"NodeResourceTopology {name or '?'}"
    zones_raw = obj.get("zones")
    if zones_raw is None:
        zones_raw = []
    if not isinstance(zones_raw, list):
        raise ValueError(f"{where}: zones is not a list")
    zones: list[NumaZone] = []
    for i, zone in enumerate(zones_raw):
        if not isinstance(zone, Mapping):
            raise ValueError(f"{where}: zones[{i}] is not a mapping")
        if zone.get("type") != ZONE_TYPE:
            continue
        zone_name = zone.get("name")
        if not isinstance(zone_name, str) or not zone_name:
            raise ValueError(f"{where}: zones[{i}].name is missing")
        amounts = _resources(zone.get("resources"), f"{where}: zones[{i}]")
        zones.append(NumaZone(zone_name, amounts.get("cpu", 0),
                              amounts.get(names.GPU_RESOURCE, 0), amounts.get("memory")))
    return NodeNuma(tuple(zones), _single_numa(obj, where))


def _resources(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValueError(f"{where}.resources is not a list")
    found: dict[str, int] = {}
    for j, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ValueError(f"{where}.resources[{j}] has no name")
        if entry["name"] not in ("cpu", "memory", names.GPU_RESOURCE):
            continue
        value = entry.get("allocatable", entry.get("capacity"))
        if value is None:
            continue
        try:
            amount = math.floor(memory_mib(value) if entry["name"] == "memory"
                                else cpu_cores(value))
        except (ValueError, TypeError) as error:
            raise ValueError(f"{where}.resources[{j}] ({entry['name']}): {error}") from None
        if amount < 0:
            raise ValueError(f"{where}.resources[{j}] ({entry['name']}): negative")
        found[entry["name"]] = amount
    return found


def _single_numa(obj: Mapping[str, Any], where: str) -> bool:
    attributes = obj.get("attributes")
    if isinstance(attributes, list):
        for entry in attributes:
            if isinstance(entry, Mapping) and entry.get("name") == POLICY_ATTRIBUTE:
                return entry.get("value") == SINGLE_NUMA_POLICY
    policies = obj.get("topologyPolicies")
    if isinstance(policies, list):
        return any(p in OLD_SINGLE_NUMA_POLICIES for p in policies)
    return False


def spans(counts: tuple[int, ...], total: int) -> tuple[tuple[int, int], ...]:
    """Consecutive ``(start, stop)`` index ranges of ``total`` items over zones reporting
    ``counts``: each zone its count, trimmed when they exceed ``total``, the last one taking
    what they leave over."""
    found: list[tuple[int, int]] = []
    start = 0
    for i, count in enumerate(counts):
        stop = min(total, start + max(0, count))
        if i == len(counts) - 1:
            stop = total
        found.append((start, stop))
        start = stop
    return tuple(found)


def shares(weights: tuple[int, ...], total: int) -> tuple[tuple[int, int], ...]:
    """Consecutive ``(start, stop)`` index ranges sharing ``total`` items out in proportion
    to ``weights`` (rounded down, the last range taking what rounding leaves); equal
    ranges when every weight is 0."""
    whole = sum(max(0, w) for w in weights)
    if whole == 0:
        weights, whole = (1,) * len(weights), len(weights)
    found: list[tuple[int, int]] = []
    start = seen = 0
    for i, weight in enumerate(weights):
        seen += max(0, weight)
        stop = total if i == len(weights) - 1 else total * seen // whole
        found.append((start, stop))
        start = stop
    return tuple(found)
