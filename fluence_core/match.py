"""Matching a whole group, all or nothing, with a log of what was sent and read.

Every jobspec of the group is matched in turn; the first that does not fit
cancels the ones already held, so a group never holds part of what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from fluence_core.graph import ResourceGraph
from fluence_core.jobspec import GroupJobspec, group_jobspecs
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation, Matcher, MatchOutcome
from fluence_core.models import Group
from fluence_core.placement import PodPlacement, read_placements


@dataclass
class GroupMatch:
    """A group that fits: its allocations by jobspec kind and a placement per pod."""

    group: Group
    allocations: dict[str, Allocation]
    placements: dict[str, PodPlacement]

    @property
    def jobids(self) -> list[int]:
        return [a.jobid for a in self.allocations.values()]


@dataclass
class GroupMiss:
    """A group that does not fit, and which jobspec stopped it."""

    group: Group
    kind: str
    outcome: MatchOutcome
    jobspecs: list[GroupJobspec] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return f"group {self.group.name}: the {self.kind} jobspec {self.outcome.value}"


def match_group(
    group: Group,
    graph: ResourceGraph,
    matcher: Matcher,
    *,
    exclude_nodes: Sequence[str] | None = None,
) -> GroupMatch | GroupMiss:
    """Match every jobspec of ``group``; on any failure cancel what was taken."""
    specs = group_jobspecs(group, graph, exclude_nodes=list(exclude_nodes or []))
    held: dict[str, Allocation] = {}
    for spec in specs:
        logger.debug("match %s/%s jobspec %s", group.name, spec.kind, spec.to_json())
        allocation = matcher.match_allocate(spec.jobspec)
        if allocation is None:
            outcome = getattr(matcher, "last_outcome", None) or MatchOutcome.BUSY
            for taken in held.values():
                matcher.cancel(taken.jobid)
            logger.info("group %s does not fit: %s jobspec %s", group.name, spec.kind, outcome.value)
            return GroupMiss(group, spec.kind, outcome, specs)
        logger.info("group %s/%s allocated %s", group.name, spec.kind, allocation.summary())
        held[spec.kind] = allocation
    placements = read_placements(group, held)
    logger.info(
        "group %s placed: %s",
        group.name,
        ", ".join(f"{p.pod}->{p.node or '-'}{'@' + p.backend if p.backend else ''}" for p in placements.values()),
    )
    return GroupMatch(group, held, placements)
