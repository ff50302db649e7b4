"""Pending groups taken in turns by tenant, within each priority.

:func:`~fluence_core.scheduler.groups.pending_groups` orders groups by priority, then
age, as kube-scheduler's queue does. Age alone lets one tenant's burst go first in
full: behind two thousand pods of one namespace that cannot fit, another
namespace's pod waited for every one of them to be tried. :func:`in_turns` keeps
the priority order strict and each namespace's own order (its oldest group first),
but takes the namespaces in turns within a priority: the first group of each, by
age, then the second of each, and so on. A namespace with one pending group is
thus tried among the first of its priority, however many another has pending; a
namespace alone is taken in its own order, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from fluence_core.scheduler.groups import PendingGroup


def in_turns(groups: Sequence[PendingGroup]) -> list[PendingGroup]:
    """``groups`` (ordered by priority, then age) with namespaces taking turns within each
    priority; the order within a namespace is kept."""
    turns: dict[tuple[int, str], int] = {}
    ranked: list[tuple[int, int, int, PendingGroup]] = []
    for index, group in enumerate(groups):
        tenant = (group.priority, group.namespace)
        turn = turns.get(tenant, 0)
        turns[tenant] = turn + 1
        ranked.append((-group.priority, turn, index, group))
    ranked.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in ranked]
