"""What a pod's fields say, read one way by admission, the controller and the quantum split.

Each reader takes a pod as the API server sends or stores it and answers from its
labels, annotations and spec alone, never from the cluster, so the handlers, the
controller's events and the split agree on what a pod is: a Fluence pod, a member of
which group, a quantum one, a scout or a worker.
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import names
from fluence_core.errors import AdmissionDenied
from fluence_core.kube.meta import annotations_of, controller_reference, labels_of, metadata_of


def pod_spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod's ``spec``, empty when absent."""
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
    return pod_spec(pod).get("schedulerName") == names.SCHEDULER_NAME


def group_of(pod: Mapping[str, Any]) -> str | None:
    value = labels_of(pod).get(names.GROUP_LABEL)
    return str(value) if value else None


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(pod_spec(pod).get("containers") or [])


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
    every = containers(pod) + list(pod_spec(pod).get("initContainers") or [])
    return any(virtual_requests(c) for c in every)


def coordination(pod: Mapping[str, Any]) -> str:
    return str(
        annotations_of(pod).get(names.COORDINATION_ANNOTATION) or names.COORDINATION_INDEPENDENT
    )


def role(pod: Mapping[str, Any]) -> str | None:
    value = labels_of(pod).get(names.ROLE_LABEL)
    return str(value) if value else None


def is_quantum_pod(pod: Mapping[str, Any]) -> bool:
    """A pod holding (or, as a split worker, having held) a virtual request."""
    return asks_for_virtual(pod) or role(pod) in (names.ROLE_SCOUT, names.ROLE_WORKER)


def names_claims(pod: Mapping[str, Any]) -> bool:
    """Whether the pod names ResourceClaims (or templates) in ``spec.resourceClaims``."""
    return bool(pod_spec(pod).get("resourceClaims"))


def is_shared_quantum(pod: Mapping[str, Any]) -> bool:
    """A member of a grouped quantum job with ``coordination: shared`` (the quantum split's pods).

    A pod that asks for its backend by claim says so only in the claim, which this module does
    not read: a shared group's pod naming claims counts, and the split refuses it if none of
    its claims asks for a QPU (:mod:`fluence_core.hybrid.claims`).
    """
    return (
        group_of(pod) is not None
        and coordination(pod) == names.COORDINATION_SHARED
        and (is_quantum_pod(pod) or names_claims(pod))
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
    group = pod_spec(pod).get("schedulingGroup") or {}
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return str(name) if name else None
