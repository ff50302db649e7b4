"""The Matcher protocol and the matcher-neutral allocation record.

An :class:`Allocation` says which cores, GPUs and memory chunks of which node,
and which virtual vertices, a job holds. It is the same whichever matcher made
it, so the durable record written on a PodGroup restores into either matcher
after a restart.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from fluence_core.models import NodeInfo


@dataclass(frozen=True)
class NodeShare:
    """What a job holds on one real node."""

    node: str
    cores: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    memory: tuple[int, ...] = ()
    memory_mib: int = 0
    pods: int = 0
    """How many pods (slots) the share holds; 0 when the matcher does not say."""
    millicores: int = 0
    """Millicores drawn from the node's shared pool (shared pods only)."""


@dataclass(frozen=True)
class VirtualShare:
    """One virtual vertex a job holds, with its whole subtree."""

    path: str
    type: str
    name: str
    backend: str
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Allocation:
    """A held match: its job id and what it holds."""

    jobid: int
    nodes: tuple[NodeShare, ...] = ()
    virtual: tuple[VirtualShare, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> "Allocation":
        data = json.loads(text) if isinstance(text, str) else dict(text)
        return cls(
            jobid=int(data["jobid"]),
            nodes=tuple(
                NodeShare(
                    node=n["node"],
                    cores=tuple(n.get("cores", ())),
                    gpus=tuple(n.get("gpus", ())),
                    memory=tuple(n.get("memory", ())),
                    memory_mib=int(n.get("memory_mib", 0)),
                    pods=int(n.get("pods", 0)),
                    millicores=int(n.get("millicores", 0)),
                )
                for n in data.get("nodes", ())
            ),
            virtual=tuple(
                VirtualShare(
                    path=v["path"], type=v["type"], name=v["name"], backend=v["backend"],
                    attributes=dict(v.get("attributes", {})),
                )
                for v in data.get("virtual", ())
            ),
        )

    def summary(self) -> str:
        parts = [
            f"{n.node}(cores={len(n.cores)},gpus={len(n.gpus)},mem={n.memory_mib}MiB)"
            for n in self.nodes
        ]
        parts += [f"{v.type}:{v.name}@{v.backend}" for v in self.virtual]
        return f"jobid {self.jobid}: " + (", ".join(parts) or "nothing")


class MatchOutcome(str, Enum):
    """Why a match returned no allocation."""

    BUSY = "does not fit now"
    UNSATISFIABLE = "can never fit on this graph"


@dataclass(frozen=True)
class GroupRefusal:
    """Why a group's jobspecs were not held together: which one stopped them, and how."""

    index: int
    """The position of the refused jobspec in the list matched."""
    outcome: MatchOutcome


@runtime_checkable
class Matcher(Protocol):
    """What the scheduler needs of a matcher.

    ``match_allocate`` returns ``None`` when the jobspec does not fit now; the
    job ids it hands out are never reused. Allocations are held until
    cancelled (duration 0).
    """

    name: str

    def match_allocate(self, jobspec: Mapping[str, Any]) -> Allocation | None: ...

    def cancel(self, jobid: int) -> bool: ...

    def restore(self, allocation: Allocation) -> None: ...

    def satisfiable(self, jobspec: Mapping[str, Any]) -> bool: ...

    def add_node(self, node: NodeInfo) -> None: ...

    def remove_node(self, name: str) -> None: ...

    def set_node_down(self, name: str, down: bool = True) -> None: ...

    def allocations(self) -> Mapping[int, Allocation]: ...


@runtime_checkable
class GroupMatcher(Matcher, Protocol):
    """A matcher that holds several jobspecs together in one match.

    A group with pods of several shapes needs one compute jobspec per shape;
    matched one after another, an early shape can take the nodes a later one
    needed. A matcher that offers :meth:`match_allocate_all` places them
    jointly. Others are driven by :func:`fluence_core.matcher.group.match_group`, which
    tries the jobspecs in several orders.
    """

    def match_allocate_all(
        self, jobspecs: Sequence[Mapping[str, Any]]
    ) -> list[Allocation] | GroupRefusal:
        """One allocation per jobspec, in order, all held; or nothing held and why."""
        ...


@runtime_checkable
class ReservationPlanner(Protocol):
    """A matcher that finds when and where a waiting group's reservation starts itself, as
    Fluxion does with ``match_allocate_orelse_reserve``.

    The scheduler's reservations (:mod:`fluence_core.scheduler.reservations`) ask it first
    and fall back on their own search (the same rule, through :class:`Matcher` alone) when
    it answers None.
    """

    def plan_reservation(
        self, holds: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
    ) -> tuple[int, list[Allocation]] | None:
        """On an empty copy of its graph, allocate each of ``holds`` now (each jobspec's
        duration is how many seconds it still holds, 0 for as long as it may), then reserve
        each of ``wanted`` at the earliest time it fits. Returns that time (seconds from now,
        the latest of them) and where each goes; None when a hold does not fit or a wanted
        jobspec cannot be reserved. What the matcher itself holds is not touched."""
        ...

