"""The webhook controller's writes, made by a bounded background writer.

The webhook's controller (:mod:`.controller`) makes what stored objects need (PodGroups,
a Flux workload's objects) and hands each write here, so its informer threads never wait
on the API server's rate limit, and no write is ever on a review's path: there a
PodGroup create was most of the review's wall time (docs/admission-cost.md).
:class:`BackgroundWriter` states what stays true of the writes: one per object at a
time, bounded, retried, and finished on a graceful stop.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import threading
import time
from dataclasses import dataclass
from typing import Callable, Final, Hashable

from fluence_core.kube.errors import ApiError
from fluence_core.log import logger

CAPACITY: Final = 1024
"""Steps that may wait at once (a PodGroup each: a burst of 1024 groups)."""
WORKERS: Final = 2
"""Threads writing; the client's rate limit, not these, sets the pace."""
ATTEMPTS: Final = 6
"""Tries of a step whose failures are transient (0.2 + 0.4 + ... + 3.2 s of backoff)."""
BACKOFF: Final = 0.2
"""Seconds before the second try; doubled before each later one."""
NOT_YET_FIRST: Final = 0.05
"""Seconds before a step that raised :class:`NotYet` is tried again; doubled each time..."""
NOT_YET_MAX: Final = 1.0
"""... up to this many."""


class NotYet(Exception):
    """Raised by a step whose object needs another one that is not stored yet: the writer
    tries it again later (:class:`BackgroundWriter`), within its write's ``patience``."""


@dataclass(frozen=True)
class Write:
    """One side effect: ``key`` names the object (one write per key at a time)."""

    key: Hashable
    description: str
    action: Callable[[], None]
    patience: float = 0.0
    """Seconds after its submission during which a :class:`NotYet` is tried again (0: never)."""
    first_delay: float = 0.0
    """Seconds to wait before the first try (what it needs is stored a moment later)."""


def transient(error: BaseException) -> bool:
    """Whether trying again later may succeed: no answer, throttled, or the server's fault."""
    return isinstance(error, ApiError) and (error.status in (0, 429) or error.status >= 500)


class BackgroundWriter:
    """A bounded queue of :class:`Write` steps and the threads that make them.

    * one write per key at a time: a key queued or being written is not queued
      again, and the step itself is idempotent ("already exists" counts as made);
    * bounded: at most ``capacity`` steps wait; when full (or closing),
      :meth:`submit` says no and the controller makes the step on its own thread:
      slower, never lost;
    * failures: a transient one (no answer, 429, 5xx) is retried with backoff;
      the last one, or a permanent one (403, 422, ...), is logged at ERROR naming
      the object and what waits for it (the object's next event, or the repair, tries
      again);
    * not yet: a step whose object needs another one stored first raises
      :class:`NotYet`; it is tried again after a short delay, doubling, holding no
      thread meanwhile, until the write's ``patience`` runs out (then it is dropped,
      logged: what it waited for never came);
    * stop: :meth:`close` writes what is queued first, and tries what waits once more,
      so a graceful restart loses nothing. A killed process loses what was queued
      (milliseconds of work); the next webhook's informers list every stored object
      at start, and the controller makes what is missing.

    ``sleep`` is the backoff's wait (tests pass one that records instead of sleeping);
    ``clock`` says when a step waiting after :class:`NotYet` is due.
    """

    def __init__(self, *, capacity: int = CAPACITY, workers: int = WORKERS,
                 attempts: int = ATTEMPTS, backoff: float = BACKOFF,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if capacity < 1 or workers < 1 or attempts < 1:
            raise ValueError(f"capacity {capacity}, workers {workers} and attempts {attempts}"
                             " must each be at least 1")
        self.capacity = capacity
        self.attempts = attempts
        self.backoff = backoff
        self._sleep = sleep
        self._clock = clock
        self._workers = workers
        self._threads: list[threading.Thread] = []
        self._queue: collections.deque[Write] = collections.deque()
        self._later: list[tuple[float, int, Write]] = []  # (due, order, write): NotYet heap
        self._deadline: dict[Hashable, tuple[float, float]] = {}  # key: (give up at, delay)
        self._order = itertools.count()
        self._keys: set[Hashable] = set()  # queued or being written
        self._busy = 0
        self._closing = False
        self._full = False  # said so in the log, until half of it drained
        self._changed = threading.Condition()
        self.written = 0
        """Steps that succeeded."""
        self.failed = 0
        """Steps given up on (each logged at ERROR)."""

    def submit(self, write: Write) -> bool:
        """Queue ``write``; False when full or closing (the caller then makes it itself).

        True without queuing when a write of the same key is queued or running.
        """
        with self._changed:
            if self._closing:
                return False
            if write.key in self._keys:
                return True
            if len(self._queue) + len(self._later) >= self.capacity:
                if not self._full:  # once per time it fills, not once per request
                    self._full = True
                    logger.warning("webhook: %d background writes wait already; until some"
                                   " are made, writes (%s first) are made on the request path",
                                   len(self._queue), write.description)
                return False
            if self._full and len(self._queue) + len(self._later) < self.capacity // 2:
                self._full = False
                logger.info("webhook: background writes are made after the answer again")
            self._keys.add(write.key)
            if write.patience > 0:
                now = self._clock()
                self._deadline[write.key] = (now + write.patience, NOT_YET_FIRST)
            if write.first_delay > 0:
                heapq.heappush(self._later,
                               (self._clock() + write.first_delay, next(self._order), write))
            else:
                self._queue.append(write)
            if len(self._threads) < self._workers:  # started on first use, not at import
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"webhook-writer-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
            self._changed.notify()
            return True

    def holds(self, key: Hashable) -> bool:
        """Whether a write of ``key`` is queued or being made now."""
        with self._changed:
            return key in self._keys

    def pending(self) -> int:
        """Steps queued, waiting to be tried again, or being written now."""
        with self._changed:
            return len(self._queue) + len(self._later) + self._busy

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every step submitted so far is done; False if ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(
                lambda: not self._queue and not self._later and not self._busy, timeout)

    def close(self, timeout: float = 30.0) -> bool:
        """Refuse new steps, write the queued ones, stop; False (and logged) if some are left."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        drained = self.flush(timeout)
        if not drained:
            with self._changed:
                left = [w.description for w in self._queue]
            logger.error("webhook: stopping with %d background write(s) not made: %s",
                         len(left), ", ".join(left[:20]))
        return drained

    def _next(self) -> Write | None:
        """The next step to make, waiting for one; None when closing with nothing left.
        Called holding the lock. Closing, what waits after NotYet is due at once."""
        while True:
            now = self._clock()
            while self._later and (self._later[0][0] <= now or self._closing):
                self._queue.append(heapq.heappop(self._later)[2])
            if self._queue:
                return self._queue.popleft()
            if self._closing:
                return None
            self._changed.wait(self._later[0][0] - now if self._later else None)

    def _work(self) -> None:
        while True:
            with self._changed:
                write = self._next()
                if write is None:
                    self._changed.notify_all()
                    return  # closing, and nothing left
                self._busy += 1
            outcome: bool | None = False
            try:
                outcome = self._make(write)
            finally:
                with self._changed:
                    self._busy -= 1
                    if outcome is None and self._try_later(write):
                        pass  # its key stays held: nothing else makes it meanwhile
                    else:
                        self._keys.discard(write.key)
                        self._deadline.pop(write.key, None)
                        if outcome:
                            self.written += 1
                        else:
                            self.failed += 1
                    self._changed.notify_all()

    def _try_later(self, write: Write) -> bool:
        """Put a step that raised NotYet back, due after its delay; False (logged) when its
        patience ran out or the writer is closing. Called holding the lock."""
        give_up, delay = self._deadline.get(write.key, (0.0, NOT_YET_FIRST))
        now = self._clock()
        if self._closing or now + delay > give_up:
            logger.warning("webhook: %s not made: what it needs was not there within %.0f s",
                           write.description, write.patience)
            return False
        self._deadline[write.key] = (give_up, min(delay * 2, NOT_YET_MAX))
        heapq.heappush(self._later, (now + delay, next(self._order), write))
        return True

    def _make(self, write: Write) -> bool | None:
        """Try ``write`` until it succeeds, fails for good, or runs out of attempts; None when
        it says :class:`NotYet` (and has patience)."""
        for attempt in range(1, self.attempts + 1):
            try:
                write.action()
                return True
            except NotYet as error:
                if write.patience > 0:
                    logger.debug("webhook: %s: not yet (%s)", write.description, error)
                    return None
                logger.error("webhook: %s failed: %s", write.description, error)
                return False
            except Exception as error:  # noqa: BLE001 - every failure is logged, none kills us
                if transient(error) and attempt < self.attempts:
                    delay = self.backoff * 2 ** (attempt - 1)
                    logger.info("webhook: %s failed (%s); try %d of %d in %.1f s",
                                write.description, error, attempt + 1, self.attempts, delay)
                    self._sleep(delay)
                    continue
                tried = f"after {attempt} attempt(s)" if transient(error) else "for good"
                logger.error("webhook: %s failed %s: %s; what was admitted needing it waits"
                             " until it exists", write.description, tried, error,
                             exc_info=not isinstance(error, ApiError))
                return False
        return False  # pragma: no cover - the loop always returns
