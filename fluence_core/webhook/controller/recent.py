"""What the webhook read or made a moment ago, shared by every request for a few seconds.

The pods of a group arrive together (a Job controller creates them in one
burst), and each used to repeat the same API calls: read the owning Job, read
the PriorityClass, read and create the group's PodGroup. Through the webhook's
rate-limited client those calls cost more than the admission itself, and at
scale they set the pace of pod creation. An entry lives
:data:`TTL` seconds: long enough to cover a burst, short enough that an
object edited or deleted since is seen again soon. Requests missing the same
key at once make one call between them: the first makes it, the others wait
for its answer (the 20 concurrent creates of a group's pods would otherwise
all miss together, and spend the client's rate limit on duplicates).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Hashable

TTL = 5.0
"""Seconds a read or a made object is trusted without asking the API server again."""
_STRIPES = 64


class Recent:
    """A thread-safe memo whose entries expire; the clock is injectable (virtual time)."""

    def __init__(self, ttl: float = TTL, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, Any]] = {}
        self._stripes = [threading.RLock() for _ in range(_STRIPES)]

    def one_at_a_time(self, key: Hashable) -> threading.RLock:
        """The lock that makes callers for ``key`` take turns (shared with a few other keys)."""
        return self._stripes[hash(key) % _STRIPES]

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value remembered for ``key``, else ``compute()`` remembered (unless it raises)."""
        found, value = self.lookup(key)
        if found:
            return value
        with self.one_at_a_time(key):
            found, value = self.lookup(key)  # computed meanwhile by the caller just served
            if found:
                return value
            value = compute()
            self.remember(key, value)
            return value

    def lookup(self, key: Hashable) -> tuple[bool, Any]:
        """``(True, value)`` when ``key`` is remembered and fresh, else ``(False, None)``."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False, None
            if entry[0] <= now:
                del self._entries[key]
                return False, None
            return True, entry[1]

    def remember(self, key: Hashable, value: Any = True) -> None:
        now = self._clock()
        with self._lock:
            if len(self._entries) > 4096:  # drop what expired before growing further
                for stale in [k for k, (until, _) in self._entries.items() if until <= now]:
                    del self._entries[stale]
            self._entries[key] = (now + self.ttl, value)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)
