"""kube-scheduler's backoff, per group: a group that failed waits before it is tried again.

A group that did not fit used to be tried again at the next cycle after any change
of the view (a watch event: another pod bound, a node's status). Under a stream of
events a backlog that cannot fit was then tried again, whole, at every cycle: its
cost grew with the backlog times the events. kube-scheduler keeps such pods aside
until a cluster event may help them, and then still lets each wait out its backoff:
``podInitialBackoffSeconds`` (1) doubled at each failed attempt, at most
``podMaxBackoffSeconds`` (10). Fluence does the same per group (a gang backs off as
one, a lone pod as itself): a group is tried again once the view changed since its
failure *and* its backoff has expired (``FLUENCE_POD_INITIAL_BACKOFF_SECONDS``,
``FLUENCE_POD_MAX_BACKOFF_SECONDS``; 0 turns backoff off).

The loop wakes when the first backoff expires (:meth:`Backoff.next_expiry`), so a
group waiting only for its backoff is not left until the next watch event.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass


@dataclass
class _Waiting:
    attempts: int
    until: float


class Backoff:
    """When each group that failed may be tried again (by the scheduler's clock)."""

    def __init__(self, clock: Callable[[], float], initial: float = 1.0,
                 maximum: float = 10.0) -> None:
        self.clock = clock
        self.initial = initial
        self.maximum = maximum
        self._waiting: dict[str, _Waiting] = {}

    def failed(self, key: str) -> float:
        """An attempt at ``key`` failed: it waits ``initial * 2**(attempts - 1)`` seconds, at
        most ``maximum``. Returns the wait."""
        if self.initial <= 0:
            return 0.0
        waiting = self._waiting.get(key)
        attempts = 1 if waiting is None else waiting.attempts + 1
        doubled: float = self.initial * float(2 ** min(attempts - 1, 62))
        wait = min(doubled, max(self.maximum, self.initial))
        self._waiting[key] = _Waiting(attempts, self.clock() + wait)
        return wait

    def ready(self, key: str) -> bool:
        """Whether ``key``'s backoff (if any) has expired."""
        waiting = self._waiting.get(key)
        return waiting is None or waiting.until <= self.clock()

    def forget(self, key: str) -> None:
        """``key`` was placed (or is gone): its next failure starts from ``initial`` again."""
        self._waiting.pop(key, None)

    def keep_only(self, keys: Collection[str]) -> None:
        """Forget every group but ``keys`` (the pending ones): what is kept stays bounded
        by the groups pending, whatever became of the others."""
        gone = [key for key in self._waiting if key not in keys]
        for key in gone:
            del self._waiting[key]

    def next_expiry(self) -> float | None:
        """The clock time at which the first backoff still running expires, if any."""
        now = self.clock()
        later = [w.until for w in self._waiting.values() if w.until > now]
        return min(later) if later else None

    def __len__(self) -> int:
        return len(self._waiting)


class Unschedulable:
    """Lone pods that failed at the view's current generation: kube-scheduler's unschedulable
    pool, which the cycle leaves out before it groups the pending pods.

    Such a pod would be skipped anyway (nothing changed since it failed), but grouping and
    ordering it each cycle was most of an idle cycle's time: two thousand of them cost more
    than a millisecond a cycle for every watch event, and under a stream of events the
    loop spent its time there. They come back, all at once, as soon as the view's
    generation moves (room may have appeared), and then wait out their backoff as before.
    Only pods of no PodGroup are kept here: a PodGroup member counts toward its gang
    whatever became of its last attempt.
    """

    def __init__(self) -> None:
        self._generation: int | None = None
        self._pods: set[tuple[str, str]] = set()

    def add(self, key: tuple[str, str], generation: int) -> None:
        """The lone pod ``key`` (namespace, name) failed at ``generation``."""
        if generation != self._generation:
            self._generation, self._pods = generation, set()
        self._pods.add(key)

    def discard(self, key: tuple[str, str]) -> None:
        """``key`` was placed, or is gone."""
        self._pods.discard(key)

    def at(self, generation: int) -> set[tuple[str, str]]:
        """The pods that failed at ``generation``: none once the view has moved on."""
        return self._pods if generation == self._generation else set()
