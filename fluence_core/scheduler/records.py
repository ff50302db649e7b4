"""The durable record: what a group holds, written on the object that owns it.

A restarted scheduler reads these annotations back and re-holds exactly what
they say before it places anything new, so it never double-allocates. A gang's
record lives on its PodGroup, a lone pod's on the pod.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fluence_core import names
from fluence_core.matcher.base import Allocation
from fluence_core.models import KubeObject


@dataclass
class HeldPlacement:
    """One placement of some members of a group, and the allocations behind it."""

    owner_resource: str
    """``podgroups`` or ``pods``."""
    namespace: str
    owner: str
    pods: list[str]
    allocations: dict[str, Allocation] = field(default_factory=dict)

    @property
    def jobids(self) -> list[int]:
        return sorted(a.jobid for a in self.allocations.values())

    def to_record(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "allocations": {kind: json.loads(a.to_json()) for kind, a in self.allocations.items()},
        }


def read_records(owner_resource: str, obj: KubeObject) -> list[HeldPlacement]:
    """The placements recorded on ``obj``; a malformed record raises ValueError naming it."""
    metadata = obj.get("metadata") or {}
    raw = (metadata.get("annotations") or {}).get(names.ALLOCATION_ANNOTATION)
    if not raw:
        return []
    where = f"{owner_resource}/{metadata.get('namespace')}/{metadata.get('name')}"
    try:
        entries = json.loads(raw)
        return [
            HeldPlacement(
                owner_resource, metadata.get("namespace") or "default", metadata.get("name") or "",
                [str(p) for p in entry["pods"]],
                {kind: Allocation.from_json(a) for kind, a in entry["allocations"].items()},
            )
            for entry in entries
        ]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{where}: unreadable {names.ALLOCATION_ANNOTATION}: {error}") from None


def record_annotations(placements: list[HeldPlacement]) -> dict[str, str | None]:
    """The annotations that record ``placements`` (None values remove them)."""
    if not placements:
        return {names.ALLOCATION_ANNOTATION: None, names.JOBIDS_ANNOTATION: None}
    jobids = sorted(j for p in placements for j in p.jobids)
    return {
        names.ALLOCATION_ANNOTATION: json.dumps([p.to_record() for p in placements], separators=(",", ":")),
        names.JOBIDS_ANNOTATION: ",".join(str(j) for j in jobids),
    }
