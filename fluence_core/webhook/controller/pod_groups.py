"""A gang's PodGroup: its minCount, owner and body, and those a grouped Job's pods need.

The controller makes PodGroups from stored objects, and the handlers refuse a pod or a
Job whose PodGroup exists with another size: both must compute the same name and
minCount from the same fields, so both ask here. A group-size or Job size Fluence cannot
hold raises :class:`~fluence_core.errors.AdmissionDenied`, the refusal a handler shows
the user and the controller logs.
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import names
from fluence_core.errors import AdmissionDenied
from fluence_core.kube.api import PODGROUPS
from fluence_core.kube.meta import annotations_of, job_controller_reference, labels_of, metadata_of
from fluence_core.limits import MAX_GROUP_SIZE
from fluence_core.webhook.pod_fields import is_shared_quantum
from fluence_core.webhook.pod_shape import shape_problem


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


def template_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Job's pod template ({} without one)."""
    return (job.get("spec") or {}).get("template") or {}


def group_of_job(job: Mapping[str, Any]) -> str | None:
    """The group label of a Job's pod template, None without one."""
    labels = labels_of(template_of(job))
    value = labels.get(names.GROUP_LABEL)
    return str(value) if value else None


def _pod(job: Mapping[str, Any]) -> dict[str, Any]:
    template = template_of(job)
    return {"metadata": metadata_of(template), "spec": template.get("spec") or {}}


def pods_size(job: Mapping[str, Any]) -> int | None:
    """The gang size the Job's pods will give, None when their handlers would refuse them
    (a bad group label or ``group-size``, a Job over Fluence's group limit).

    Such a Job keeps its template as written: a pod pointing at its own group is not
    sent to the webhook (the gang handler's
    :attr:`~fluence_core.webhook.admission.handlers.gang.GangHandler.match_condition`), so
    only an unnamed one reaches the handler that refuses it with the reason.
    """
    pod = _pod(job)
    if shape_problem(pod) is not None:
        return None
    try:
        return (positive_int_annotation(pod, names.GROUP_SIZE_ANNOTATION)
                or job_size(job) or 1)
    except AdmissionDenied:
        return None


def pod_groups_of(job: Mapping[str, Any], group: str, size: int) -> list[tuple[str, int]]:
    """``(PodGroup, minCount)`` of every PodGroup the Job's pods will point at, as their
    handlers would make them: a gang's one, a shared quantum group's scout and workers
    (none for one that is not Indexed: the quantum split refuses its pods)."""
    if not is_shared_quantum(_pod(job)):
        return [(group, pod_group_min_count(group, group, size, None))]
    if (job.get("spec") or {}).get("completionMode") != "Indexed":
        return []
    return [(target, pod_group_min_count(target, group, size, role))
            for target, role in ((group + names.SCOUT_GROUP_SUFFIX, names.ROLE_SCOUT),
                                 (group, names.ROLE_WORKER))]
