"""When to tell a group that is still arriving why it waits.

A gang whose members are not all there yet (or whose PodGroup is not), is not a
failed attempt: its pods are usually on their way, created by a Job controller or
a client a few milliseconds apart. kube-scheduler holds such pods at PreEnqueue
and writes nothing about them. Fluence used to tell every such gang at once
(a FailedScheduling event and a ``PodScheduled=False`` condition on each member,
the PodGroup's condition) and again each time one more member came, since the
count is in the message: a gang of 8 arriving one pod per cycle cost up to 28 pod
patches, 7 PodGroup patches and 28 events, written by the scheduling loop itself.
In a stream of gangs at 5,000 nodes this was 92 % of the loop's time (py-spy,
``bench_scale.py --workloads mixed``).

:class:`ArrivalReports` keeps that report for a group that is still waiting after
``quiet`` seconds from when it was first seen (``FLUENCE_ARRIVAL_REPORT_SECONDS``),
and then at most once per ``quiet`` seconds while the reason keeps changing (the
newest count is told then). A group complete within ``quiet`` is never told.
``quiet`` 0 tells at once, every change, as before. The loop wakes when the first
held report is due (:meth:`next_due`), so a gang that stays incomplete is told
even if nothing else happens.
"""

from __future__ import annotations

from collections.abc import Callable, Collection


class ArrivalReports:
    """Which still-arriving groups are due to be told, by the scheduler's clock."""

    def __init__(self, clock: Callable[[], float], quiet: float = 0.0) -> None:
        self.clock = clock
        self.quiet = quiet
        self._since: dict[str, float] = {}
        """Group key -> when its quiet period started (first seen, or last told)."""
        self._due: dict[str, float] = {}
        """Group key -> when its held report is due (only groups with one held)."""

    def due(self, key: str, changed: bool) -> bool:
        """Whether the group ``key``, still arriving, is told now.

        ``changed``: its reason differs from what it was last told (an unchanged reason is
        never told again, and holds nothing). When this returns True the caller tells it,
        and its next report waits another ``quiet`` seconds.
        """
        now = self.clock()
        since = self._since.setdefault(key, now)
        if not changed:
            self._due.pop(key, None)
            return False
        if self.quiet <= 0 or now >= since + self.quiet:
            self._since[key] = now
            self._due.pop(key, None)
            return True
        self._due[key] = since + self.quiet
        return False

    def forget(self, key: str) -> None:
        """``key`` is ready, placed or gone: a later wait starts a quiet period of its own."""
        self._since.pop(key, None)
        self._due.pop(key, None)

    def keep_only(self, keys: Collection[str]) -> None:
        """Forget every group not among ``keys`` (the pending ones)."""
        for table in (self._since, self._due):
            for key in [k for k in table if k not in keys]:
                del table[key]

    def next_due(self) -> float | None:
        """When the first held report is due, or None when none is held."""
        return min(self._due.values(), default=None)
