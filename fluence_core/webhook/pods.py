"""Reading pods the way every handler needs to, and the shared cluster steps."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from fluence_core import names
from fluence_core.kube.api import PODGROUPS
from fluence_core.kube.meta import (
    annotations_of,
    controller_reference,
    job_controller_reference,
    labels_of,
    metadata_of,
    owner_references_of,
)
from fluence_core.limits import MAX_GROUP_SIZE
from fluence_core.webhook import cel
from fluence_core.webhook.admission.base import AdmissionContext, AdmissionDenied

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                            re.ASCII)
MAX_GROUP_NAME = 253 - len(names.SCOUT_GROUP_SUFFIX)
"""A group names PodGroups ``<group>`` and ``<group>-scout``: both must be object names."""
_COORDINATIONS = (names.COORDINATION_INDEPENDENT, names.COORDINATION_SHARED)


def shape_problem(pod: Mapping[str, Any]) -> str | None:
    """What makes ``pod`` unreadable for the handlers, or None.

    The API server validates a Pod only after mutating webhooks ran, so a review
    can carry any JSON: every field the handlers read is checked here once, and
    each problem is named with its path.
    """
    meta = pod.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        return "pod metadata is not an object"
    meta = meta or {}
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not isinstance(value, Mapping):
            return f"metadata.{key} is not an object"
    body = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        listed = body.get(key)
        if listed is None:
            continue
        if not isinstance(listed, list):
            return f"spec.{key} is not a list"
        for i, container in enumerate(listed):
            if not isinstance(container, Mapping):
                return f"spec.{key}[{i}] is not an object"
            resources = container.get("resources")
            if resources is None:
                continue
            if not isinstance(resources, Mapping):
                return f"spec.{key}[{i}].resources is not an object"
            for part in ("requests", "limits"):
                if resources.get(part) is not None and not isinstance(resources[part], Mapping):
                    return f"spec.{key}[{i}].resources.{part} is not an object"
    group = labels_of(pod).get(names.GROUP_LABEL)
    if group and (not isinstance(group, str) or len(group) > MAX_GROUP_NAME
                  or not _DNS_SUBDOMAIN.fullmatch(group)):
        return (f"label {names.GROUP_LABEL}: group {str(group)[:80]!r} must be a lower-case DNS"
                f" name of at most {MAX_GROUP_NAME} characters (it names the PodGroup)")
    coordination = annotations_of(pod).get(names.COORDINATION_ANNOTATION)
    if coordination is not None and coordination not in _COORDINATIONS:
        return (f"{names.COORDINATION_ANNOTATION}={str(coordination)[:40]!r} must be"
                f" {' or '.join(repr(c) for c in _COORDINATIONS)}")
    return None


def shape_condition() -> str:
    """CEL true for every pod :func:`shape_problem` may refuse, as the API server sends it.

    The API server decodes a Pod before any webhook sees it, so the structural
    checks (objects, lists) cannot fail on what it sends; a bad group label or
    coordination annotation can, and a pod carrying one must reach the webhook.
    """
    group = cel.label(names.GROUP_LABEL)
    dns = cel.quoted(f"^{_DNS_SUBDOMAIN.pattern}$")
    bad_group = cel.all_of(f"{group} != ''", f"!({group}.size() <= {MAX_GROUP_NAME} && "
                                              f"{group}.matches({dns}))")
    allowed = ", ".join(cel.quoted(c) for c in _COORDINATIONS)
    bad_coordination = cel.all_of(
        cel.has_annotation(names.COORDINATION_ANNOTATION),
        f"!({cel.annotation(names.COORDINATION_ANNOTATION)} in [{allowed}])")
    return cel.any_of(bad_group, bad_coordination)


def spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("spec") or {}


def pod_label(pod: Mapping[str, Any]) -> str:
    """``namespace/name`` (or the generateName prefix) for messages."""
    meta = metadata_of(pod)
    name = meta.get("name") or (meta.get("generateName") or "") + "*"
    return f"{meta.get('namespace') or '?'}/{name}"


def controller_of(obj: Mapping[str, Any], kind: str) -> tuple[str, str] | None:
    """(name, uid) of the object's controller when it is a ``kind``; None otherwise.

    Only a reference with ``controller: true`` and a uid counts: that is what the
    controllers themselves write, and the uid cannot be guessed from a name.
    """
    ref = controller_reference(obj)
    if ref is None or ref.get("kind") != kind:
        return None
    return str(ref["name"]), str(ref["uid"])


def is_fluence_pod(pod: Mapping[str, Any]) -> bool:
    return spec(pod).get("schedulerName") == names.SCHEDULER_NAME


def group_of(pod: Mapping[str, Any]) -> str | None:
    value = labels_of(pod).get(names.GROUP_LABEL)
    return str(value) if value else None


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(spec(pod).get("containers") or [])


def virtual_requests(container: Mapping[str, Any]) -> dict[str, str]:
    """``{extended resource name: section}`` for every virtual resource the container names."""
    found: dict[str, str] = {}
    resources = container.get("resources") or {}
    for section in ("requests", "limits"):
        for key in resources.get(section) or {}:
            if names.virtual_type_of(str(key)) is not None:
                found.setdefault(str(key), section)
    return found


def asks_for_virtual(pod: Mapping[str, Any]) -> bool:
    every = containers(pod) + list(spec(pod).get("initContainers") or [])
    return any(virtual_requests(c) for c in every)


def coordination(pod: Mapping[str, Any]) -> str:
    return str(
        annotations_of(pod).get(names.COORDINATION_ANNOTATION) or names.COORDINATION_INDEPENDENT
    )


def role(pod: Mapping[str, Any]) -> str | None:
    value = labels_of(pod).get(names.ROLE_LABEL)
    return str(value) if value else None


def is_quantum(pod: Mapping[str, Any]) -> bool:
    """A pod holding (or, as a split worker, having held) a virtual request."""
    return asks_for_virtual(pod) or role(pod) in (names.ROLE_SCOUT, names.ROLE_WORKER)


def is_shared_quantum(pod: Mapping[str, Any]) -> bool:
    """A member of a grouped quantum job with ``coordination: shared`` (the quantum split's pods).
    """
    return (
        group_of(pod) is not None
        and coordination(pod) == names.COORDINATION_SHARED
        and is_quantum(pod)
    )


def completion_index(pod: Mapping[str, Any]) -> int | None:
    raw = labels_of(pod).get(names.JOB_COMPLETION_INDEX) or annotations_of(pod).get(
        names.JOB_COMPLETION_INDEX
    )
    if raw is None:
        return None
    try:
        return int(str(raw))
    except ValueError:
        raise AdmissionDenied(f"{names.JOB_COMPLETION_INDEX}={raw!r} is not an integer") from None


def scheduling_group(pod: Mapping[str, Any]) -> str | None:
    group = spec(pod).get("schedulingGroup") or {}
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return str(name) if name else None


def owning_job(pod: Mapping[str, Any], ctx: AdmissionContext) -> Mapping[str, Any] | None:
    """The Job that owns the pod (owner reference, else the job-name label), or None."""
    name = None
    for ref in owner_references_of(pod):
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
            name = ref.get("name")
            break
    name = name or labels_of(pod).get(JOB_NAME_LABEL)
    if not name or ctx.cluster is None:
        return None
    cluster = ctx.cluster
    job: Mapping[str, Any] | None = ctx.cached(
        ("job", ctx.namespace, name), lambda: ctx.watched.job(cluster, ctx.namespace, name))
    return job


def positive_int_annotation(obj: Mapping[str, Any], key: str,
                            limit: int = MAX_GROUP_SIZE) -> int | None:
    """Annotation ``key`` as a positive integer up to ``limit``, None when absent; anything else
    is refused. Only ASCII digits count: Python's ``int`` also reads ``"4_000"`` and ``"\u0663"``
    (an Arabic-Indic three), which nothing else in Kubernetes would."""
    raw = annotations_of(obj).get(key)
    if raw is None:
        return None
    text = str(raw)
    if not (0 < len(text) <= len(str(limit)) and text.isascii() and text.isdigit()):
        raise AdmissionDenied(f"{key}={_shown(raw)} must be a positive integer written in"
                              f" ASCII digits, at most {limit}")
    value = int(text)
    if not 1 <= value <= limit:
        raise AdmissionDenied(f"{key}={_shown(raw)} must be a positive integer, at most {limit}")
    return value


def _shown(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


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
    has_job = labels_of(pod).get(JOB_NAME_LABEL) or any(
        isinstance(ref, Mapping) and ref.get("kind") == "Job"
        for ref in owner_references_of(pod))
    return None if has_job else 1


def job_size(job: Mapping[str, Any]) -> int | None:
    """A Job's parallelism, else its completions; None when it says neither."""
    job_spec = job.get("spec") or {}
    for key in ("parallelism", "completions"):
        value = job_spec.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            if value > MAX_GROUP_SIZE:
                raise AdmissionDenied(f"Job {key}={value} is more than Fluence's limit of"
                                      f" {MAX_GROUP_SIZE} pods in a group")
            return value
    return None


def pod_group_min_count(pod_group: str, group: str, size: int, pod_role: str | None) -> int:
    """minCount of PodGroup ``pod_group`` made for a pod of ``group`` (``size`` pods in all).

    A shared quantum group's scout has ``<group>-scout`` of one and its workers
    ``<group>`` of the rest; a gang has ``<group>`` of all. The handlers and the
    repair of lost PodGroups (:mod:`~fluence_core.webhook.controller.repair`) both ask here.
    """
    if pod_group == group + names.SCOUT_GROUP_SUFFIX:
        return 1
    if pod_role == names.ROLE_WORKER:
        return max(1, size - 1)
    return size


def job_owner(pod: Mapping[str, Any]) -> dict[str, str] | None:
    """The owner reference a PodGroup made for ``pod`` gets: the pod's controlling Job (its
    uid is on the pod, so this costs no call), so the garbage collector deletes the PodGroup
    with the Job; None for a pod no Job controls."""
    ref = job_controller_reference(pod)
    if ref is None:
        return None
    return {"apiVersion": str(ref["apiVersion"]), "kind": "Job",
            "name": str(ref["name"]), "uid": str(ref["uid"])}


def pod_group_body(name: str, namespace: str, min_count: int,
                   owner: Mapping[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {names.MANAGED_BY_LABEL: names.SCHEDULER_NAME},
    }
    if owner is not None:  # no blockOwnerDeletion: that would need rights on the Job
        metadata["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": PODGROUPS.kind,
        "metadata": metadata,
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def min_count_of(pod_group: Mapping[str, Any]) -> int | None:
    """A stored PodGroup's gang minCount, None when it has none."""
    gang = ((pod_group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
    value = gang.get("minCount")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def size_key(namespace: str, name: str) -> tuple[str, str, str]:
    """Where :attr:`AdmissionContext.recent` keeps the minCount PodGroup ``name`` was made
    with by the controller (or found with): a pod asking for another is refused without
    asking the API server."""
    return ("podgroup-size", namespace, name)


def size_conflict(namespace: str, name: str, existing: int, wanted: int) -> str:
    """The refusal of a gang whose PodGroup exists with another minCount (both named)."""
    return (f"PodGroup {namespace}/{name} has minCount {existing}, but this gang needs"
            f" {wanted}: a group name names one gang at a time (an earlier gang of that name"
            f" still has its PodGroup, or this gang's pods or Job disagree on its size). Let"
            f" the earlier gang end (Fluence deletes its PodGroup with its Job, or once its"
            f" last pod ended), delete the PodGroup, or choose another group name")


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
    pod (:mod:`.controller.controller`), never from the review (issue 32: anyone reaching the
    port could POST one, and what admission made or remembered, it made for them).
    Known means: in the PodGroup informer (:mod:`.controller.informer`; nothing is read while it
    is not synced), or made by the controller seconds ago. ``min_count``, when a
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
