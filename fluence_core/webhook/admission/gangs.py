"""A gang as admission sees it: its size, and whether its PodGroup lets the pod in.

The gang and job-group handlers and the quantum split learn a group's size from the
pod's ``group-size`` annotation, else from its Job (read through the request's context,
only when the number is needed), and refuse a pod whose PodGroup is known to hold
another minCount or to be on its way out. They make nothing: the controller does.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from fluence_core import names
from fluence_core.kube.api import PODGROUPS
from fluence_core.kube.meta import labels_of, metadata_of, owner_references_of
from fluence_core.webhook.admission.base import AdmissionContext, AdmissionDenied
from fluence_core.webhook.controller.pod_groups import (
    job_size,
    min_count_of,
    positive_int_annotation,
    size_conflict,
    size_key,
)


def owning_job(pod: Mapping[str, Any], ctx: AdmissionContext) -> Mapping[str, Any] | None:
    """The Job that owns the pod (owner reference, else the job-name label), or None."""
    name = None
    for ref in owner_references_of(pod):
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
            name = ref.get("name")
            break
    name = name or labels_of(pod).get(names.JOB_NAME_LABEL)
    if not name or ctx.cluster is None:
        return None
    cluster = ctx.cluster
    job: Mapping[str, Any] | None = ctx.cached(
        ("job", ctx.namespace, name), lambda: ctx.watched.job(cluster, ctx.namespace, name))
    return job


def group_size(pod: Mapping[str, Any], ctx: AdmissionContext) -> int:
    """The gang's minCount: annotation ``group-size``, else the Job's parallelism/completions, else
    1."""
    return group_size_later(pod, ctx)()


def group_size_later(pod: Mapping[str, Any], ctx: AdmissionContext) -> Callable[[], int]:
    """:func:`group_size`, with the owning Job read only when the result is asked for.

    The annotation is checked now (a bad one is refused on every pod); the Job,
    a read costing the API server about as much as a small write, is read only
    by the caller that needs the number: a PodGroup already known to exist
    needs none (:func:`ensure_pod_group`).
    """
    size = positive_int_annotation(pod, names.GROUP_SIZE_ANNOTATION)
    if size is not None:
        return lambda: size

    def from_job() -> int:
        job = owning_job(pod, ctx)
        return (job_size(job) if job is not None else None) or 1
    return from_job


def known_group_size(pod: Mapping[str, Any]) -> int | None:
    """:func:`group_size` when it needs no read: the ``group-size`` annotation, else 1 for a
    pod no Job owns; None when only the owning Job can say."""
    size = positive_int_annotation(pod, names.GROUP_SIZE_ANNOTATION)
    if size is not None:
        return size
    has_job = labels_of(pod).get(names.JOB_NAME_LABEL) or any(
        isinstance(ref, Mapping) and ref.get("kind") == "Job"
        for ref in owner_references_of(pod))
    return None if has_job else 1


def check_known_size(ctx: AdmissionContext, name: str, wanted: int) -> None:
    """Refuse when this webhook knows PodGroup ``name`` has (or is being made with) another
    minCount than ``wanted``; it asks the API server nothing."""
    found, existing = ctx.recent.lookup(size_key(ctx.namespace, name))
    if found and existing != wanted:
        raise AdmissionDenied(size_conflict(ctx.namespace, name, existing, wanted))


def check_pod_group(ctx: AdmissionContext, name: str,
                    min_count: int | Callable[[], int]) -> None:
    """Refuse a pod whose PodGroup ``name`` is known to have another minCount than
    ``min_count``, or to be being deleted; make nothing, remember nothing.

    What a pod's PodGroup needs is made by the webhook's controller from the stored
    pod (:mod:`~fluence_core.webhook.controller.controller`), never from the review
    (anyone reaching the port could POST one, and what admission made or remembered,
    it would make for them). Known means: in the PodGroup informer
    (:mod:`~fluence_core.webhook.controller.informer`; nothing is read while it is not
    synced), or made by the controller seconds ago. ``min_count``, when a
    function (learning it may read the owning Job), is asked only while the PodGroup is
    still to be made, so a gang Fluence cannot hold is refused with the reason.
    A PodGroup being deleted refuses the pod: its protection finalizer would keep it
    while the new gang's pods point at it, and the scheduler would use a PodGroup on
    its way out.
    """
    if not callable(min_count):
        check_known_size(ctx, name, min_count)
    informer = ctx.watched.pod_groups
    known, existing = (False, None) if informer is None else informer.lookup(ctx.namespace,
                                                                             name)
    if not known or existing is None:
        made = ctx.recent.lookup((PODGROUPS.plural, ctx.namespace, name))[0]
        if callable(min_count) and not made and not ctx.writing(
                (PODGROUPS.plural, ctx.namespace, name)):
            min_count()  # still to be made: a size Fluence cannot hold is refused now
        return
    has = min_count_of(existing)
    if metadata_of(existing).get("deletionTimestamp"):
        raise AdmissionDenied(
            f"PodGroup {ctx.namespace}/{name} (minCount {has}) is being deleted: its earlier"
            f" gang is ending. Create this pod again once it is gone, or choose another group"
            f" name")
    if has is not None and not callable(min_count) and has != min_count:
        raise AdmissionDenied(size_conflict(ctx.namespace, name, has, min_count))
