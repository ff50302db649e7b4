"""Writing a committed group's claims before its pods are bound, and taking them back.

As kube-scheduler does in its PreBind, each newly allocated claim first gets
the ``resource.kubernetes.io/delete-protection`` finalizer (so the
resourceclaim controller may later clear the allocation, and the claim cannot
vanish while allocated), then its ``status.allocation`` and ``reservedFor``
in one status write. A claim already allocated only gets the pods added to
``reservedFor``. Every write carries the resourceVersion it read. On a Conflict
the claim is read again and the write made afresh, as kube-scheduler retries,
unless what the match relied on moved: a claim allocated meanwhile (by
kube-scheduler, say), one whose allocation changed or went, or one being
deleted. Those raise, the group is rolled back and matched again, and no device
is ever allocated twice.

:func:`write_all` writes a group's claims side by side when given a pool (a gang
of 64 members has 128 writes to make before its first bind), all or none.
:func:`undo` takes back what :func:`write` did: the pods leave ``reservedFor``,
an allocation Fluence wrote is cleared and its finalizer removed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from concurrent.futures import Executor, wait
from typing import Any

from fluence_core import names
from fluence_core.dra.plan import ClaimWrite
from fluence_core.kube.api import RESOURCE_CLAIMS, ClusterAPI, KubeObject
from fluence_core.kube.errors import ApiError, Conflict
from fluence_core.kube.meta import metadata_of
from fluence_core.log import logger


CONFLICT_ATTEMPTS = 5
"""Writes of one claim, the first included, before a run of Conflicts is given up."""


def write(cluster: ClusterAPI, change: ClaimWrite) -> KubeObject:
    """Write one claim (see the module docstring); raises the API's error."""
    obj = change.claim.obj
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return _write_once(cluster, change, obj)
        except Conflict:
            if attempt == CONFLICT_ATTEMPTS:
                raise
            obj = _still_as_matched(cluster, change)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _still_as_matched(cluster: ClusterAPI, change: ClaimWrite) -> KubeObject:
    """The claim read again after a Conflict, if the match still holds for it; raises
    a Conflict naming what moved otherwise."""
    claim = change.claim
    current = cluster.get(RESOURCE_CLAIMS, claim.name, claim.namespace)
    moved: str | None = None
    if current is None or metadata_of(current).get("deletionTimestamp"):
        moved = "got deleted"
    else:
        allocation = (current.get("status") or {}).get("allocation")
        if change.allocation is not None and allocation:
            moved = "got allocated elsewhere"
        elif change.allocation is None and allocation != claim.allocation:
            moved = "had its allocation changed"
    if moved is not None or current is None:
        raise Conflict(409, f"claim {claim.namespace}/{claim.name} {moved} in the meantime",
                       "Conflict")
    logger.debug("claim %s/%s changed since it was read: writing it again",
                 claim.namespace, claim.name)
    return current


def _write_once(cluster: ClusterAPI, change: ClaimWrite, obj: KubeObject) -> KubeObject:
    claim = change.claim
    version = metadata_of(obj).get("resourceVersion")
    if change.allocation is not None:
        finalizers = list(metadata_of(obj).get("finalizers") or [])
        if names.CLAIM_PROTECTION_FINALIZER not in finalizers:
            obj = cluster.patch(RESOURCE_CLAIMS, claim.name, {"metadata": {
                "resourceVersion": version,
                "finalizers": [*finalizers, names.CLAIM_PROTECTION_FINALIZER]}},
                claim.namespace)
            version = metadata_of(obj).get("resourceVersion")
    reserved = [dict(r) for r in (obj.get("status") or {}).get("reservedFor") or []]
    there = {r.get("uid") for r in reserved}
    status: dict[str, Any] = {"reservedFor": [
        *reserved, *(dict(c) for c in change.consumers if c["uid"] not in there)]}
    if change.allocation is not None:
        status["allocation"] = dict(change.allocation)
    written = cluster.patch_status(RESOURCE_CLAIMS, claim.name,
                                   {"metadata": {"resourceVersion": version}, "status": status},
                                   claim.namespace)
    logger.debug("claim %s/%s %s for %s", claim.namespace, claim.name,
                 "allocated and reserved" if change.allocation is not None else "reserved",
                 ", ".join(c["name"] for c in change.consumers))
    return written


def write_all(cluster: ClusterAPI, changes: Sequence[ClaimWrite],
              pool: Executor | None = None) -> None:
    """Write every claim, or none: on a failure the ones written are undone and the first
    error raised. With ``pool`` (and more than one claim) the writes go side by side;
    after a failure no write not yet started is made."""
    done: list[ClaimWrite] = []
    failed: list[Exception] = []

    def one(change: ClaimWrite) -> None:
        if failed:
            return
        try:
            write(cluster, change)
        except Exception as error:  # noqa: BLE001 - raised below, once the others finished
            failed.append(error)
            return
        done.append(change)
    if pool is None or len(changes) < 2:
        for change in changes:
            one(change)
            if failed:
                break
    else:
        wait([pool.submit(one, change) for change in changes])
    if failed:
        undo(cluster, done, ())
        raise failed[0]


def undo(cluster: ClusterAPI, changes: Sequence[ClaimWrite], kept: Collection[str]) -> None:
    """Take back ``changes`` (best effort, logged), but for the pods named in ``kept``
    (bound: they run there, and their claim must stay theirs)."""
    for change in changes:
        leaving = {c["uid"] for c in change.consumers if c["name"] not in kept}
        if not leaving:
            continue
        claim = change.claim
        try:
            current = cluster.get(RESOURCE_CLAIMS, claim.name, claim.namespace)
            if current is None:
                continue
            status = current.get("status") or {}
            staying = [r for r in status.get("reservedFor") or [] if r.get("uid") not in leaving]
            patch: dict[str, Any] = {
                "metadata": {"resourceVersion": metadata_of(current).get("resourceVersion")},
                "status": {"reservedFor": staying or None}}
            ours = change.allocation is not None and not staying
            if ours:
                patch["status"]["allocation"] = None
            current = cluster.patch_status(RESOURCE_CLAIMS, claim.name, patch, claim.namespace)
            finalizers = list(metadata_of(current).get("finalizers") or [])
            if ours and names.CLAIM_PROTECTION_FINALIZER in finalizers:
                finalizers.remove(names.CLAIM_PROTECTION_FINALIZER)
                cluster.patch(RESOURCE_CLAIMS, claim.name, {"metadata": {
                    "resourceVersion": metadata_of(current).get("resourceVersion"),
                    "finalizers": finalizers or None}}, claim.namespace)
        except ApiError as error:
            logger.error("cannot take back the allocation of claim %s/%s: %s "
                         "(the resourceclaim controller releases it once its pods are gone)",
                         claim.namespace, claim.name, error)
