"""Keep the driver's ResourceSlices equal to what the resources file says.

:meth:`SlicePublisher.publish` is a reconcile: it lists the slices the driver
owns (its ``managed-by`` label and its driver name), and for each pool compares
the digest written on them with the digest of the pool it should publish. A pool
whose devices changed, or whose slices are not all there, is published anew at
``generation + 1``: every new slice first, then the old ones deleted. A
scheduler counts only a pool's newest generation and only once all its
``resourceSliceCount`` slices are there, so it never allocates from half a pool
nor from a device that is about to go. A pool the file no longer has is deleted.
Acting on what the API server shows, rather than remembering what was written,
makes a restarted driver, a deleted slice or a missed change come out right on
the next pass.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluence_core.api import (
    RESOURCE_SLICES, ClusterAPI, KubeObject, ResourceConfig, annotations_of, logger,
    metadata_of, names,
)
from fluence_dra_qpu.devices import PoolDevices, pools_of

MAX_DEVICES_PER_SLICE = 128
"""Kubernetes' limit on the devices of one ResourceSlice."""
MAX_SLICE_NAME = 253


@dataclass
class _Published:
    generation: int = 0
    digest: str | None = None
    """The newest generation's digest, when all its slices agree on one."""
    expected: int = 0
    newest: list[str] = field(default_factory=list)
    older: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PublishResult:
    """What one pass changed: pools published anew (name -> generation) and pools removed."""

    published: Mapping[str, int]
    removed: Sequence[str]


def digest_of(pool: PoolDevices) -> str:
    """A digest of everything a pool's slices say about its devices."""
    text = json.dumps({"node": pool.node, "devices": pool.devices}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def slice_name(pool: str, generation: int, index: int) -> str:
    """``fluence-dra-qpu-<pool>-<generation>-<index>``; a hash stands for a pool name too
    long for that."""
    name = f"{names.QPU_DRIVER_MANAGER}-{pool}-{generation}-{index}"
    if len(name) <= MAX_SLICE_NAME:
        return name
    short = hashlib.sha256(pool.encode()).hexdigest()[:16]
    return f"{names.QPU_DRIVER_MANAGER}-{short}-{generation}-{index}"


class SlicePublisher:
    """Publishes a resources file's pools as the driver's ResourceSlices."""

    def __init__(self, kube: ClusterAPI, driver: str = names.QPU_DRA_DRIVER) -> None:
        self.kube = kube
        self.driver = driver
        self._warned: ResourceConfig | None = None
        """The file whose left-out attributes were logged: each file's once, not each pass."""

    def owned(self) -> list[KubeObject]:
        """The slices this driver published (its label and its driver name)."""
        found = self.kube.list(
            RESOURCE_SLICES,
            label_selector=f"{names.MANAGED_BY_LABEL}={names.QPU_DRIVER_MANAGER}").items
        return [s for s in found if (s.get("spec") or {}).get("driver") == self.driver]

    def publish(self, config: ResourceConfig) -> PublishResult:
        """One reconcile pass; an :class:`ApiError` leaves the rest to the next pass."""
        wanted = pools_of(config, warn=config != self._warned)
        self._warned = config
        seen = self._published()
        published: dict[str, int] = {}
        for name, pool in wanted.items():
            current = seen.get(name, _Published())
            digest = digest_of(pool)
            chunks = _chunks(pool.devices)
            if current.digest == digest and len(current.newest) == len(chunks) \
                    == current.expected:
                self._delete(current.older)
                continue
            generation = current.generation + 1
            for index, devices in enumerate(chunks):
                self.kube.create(RESOURCE_SLICES, self._slice(
                    pool, generation, index, len(chunks), devices, digest))
            self._delete(current.newest + current.older)
            published[name] = generation
            logger.info("qpu driver: pool %s published at generation %d: %d devices in %d"
                        " slices, reachable from %s", name, generation, len(pool.devices),
                        len(chunks), pool.node or "all nodes")
        removed = sorted(set(seen) - set(wanted))
        for name in removed:
            self._delete(seen[name].newest + seen[name].older)
            logger.info("qpu driver: pool %s is no longer in %s; its slices are deleted",
                        name, config.source)
        return PublishResult(published, removed)

    def _published(self) -> dict[str, _Published]:
        pools: dict[str, _Published] = {}
        for obj in self.owned():
            spec = obj.get("spec") or {}
            pool = spec.get("pool") or {}
            name = str(pool.get("name"))
            generation = int(pool.get("generation") or 0)
            slice_name_ = str(metadata_of(obj).get("name"))
            digest = annotations_of(obj).get(names.QPU_DEVICES_DIGEST_ANNOTATION)
            found = pools.setdefault(name, _Published())
            if generation > found.generation:
                found.older += found.newest
                found.generation, found.newest = generation, [slice_name_]
                found.digest, found.expected = digest, int(pool.get("resourceSliceCount") or 1)
            elif generation == found.generation:
                found.newest.append(slice_name_)
                if digest != found.digest:
                    found.digest = None
            else:
                found.older.append(slice_name_)
        return pools

    def _slice(self, pool: PoolDevices, generation: int, index: int, count: int,
               devices: Sequence[Mapping[str, Any]], digest: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "driver": self.driver,
            "pool": {"name": pool.name, "generation": generation,
                     "resourceSliceCount": count},
            "devices": [dict(d) for d in devices],
        }
        if pool.node is None:
            spec["allNodes"] = True
        else:
            spec["nodeName"] = pool.node
        return {
            "apiVersion": RESOURCE_SLICES.api_version, "kind": RESOURCE_SLICES.kind,
            "metadata": {
                "name": slice_name(pool.name, generation, index),
                "labels": {names.MANAGED_BY_LABEL: names.QPU_DRIVER_MANAGER},
                "annotations": {names.QPU_DEVICES_DIGEST_ANNOTATION: digest},
            },
            "spec": spec,
        }

    def _delete(self, slice_names: Sequence[str]) -> None:
        for name in slice_names:
            self.kube.delete(RESOURCE_SLICES, name)


def _chunks(devices: Sequence[dict[str, Any]]) -> list[Sequence[dict[str, Any]]]:
    if not devices:
        return [()]
    return [devices[i:i + MAX_DEVICES_PER_SLICE]
            for i in range(0, len(devices), MAX_DEVICES_PER_SLICE)]
