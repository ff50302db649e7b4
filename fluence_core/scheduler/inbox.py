"""What the watch threads delivered and the scheduling loop has not applied yet.

The loop applies watch events between cycles, and a cycle over a large backlog
holds the view for a long time (ten thousand pending pods on five thousand nodes:
tens of seconds). A plain queue kept every event of that time, and every re-list
the watches made while it waited, until the loop came back: memory grew with the
events, not with the cluster. The inbox keeps, as client-go's informers do, what
is needed to bring the view up to date and nothing more:

* the newest state of each object (keyed by kind, namespace, name and uid, so a
  pod deleted and created again under its name stays two changes, in order);
* at most one re-list per kind: a RESYNC (history lost, 410) replaces the kind's
  changes still waiting, which it supersedes, and any older RESYNC of that kind;
* whether a binding finished (the next cycle settles it);
* whether a pod for Fluence to place was added (or pods listed again) since the
  loop last took: a cycle over a backlog ends early for them (:meth:`arrivals`).

So what it holds is bounded by the number of objects in the cluster, whatever the
rate of events or the length of a cycle. :meth:`take` hands everything over at
once, each kind's RESYNC before its later changes.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from fluence_core.kube.api import ADDED, PODS, RESYNC, KubeObject
from fluence_core.kube.meta import metadata_or_none
from fluence_core.scheduler.groups import is_bound, is_ours

Change = tuple[str, str, KubeObject]
"""(plural, event, object), as :meth:`ClusterView.handle` takes them."""


class Inbox:
    """Thread-safe: watch threads and bindings put, the scheduling loop takes."""

    def __init__(self) -> None:
        self._lock = threading.Condition(threading.Lock())
        self._resyncs: dict[str, KubeObject] = {}
        self._changes: dict[tuple[Any, ...], Change] = {}
        self._settle = False
        self._arrived = False
        self._unkeyed = itertools.count()
        self.coalesced = 0
        """Changes replaced by a newer one of the same object before the loop applied them
        (a figure for tests and logs)."""

    def put(self, plural: str, event: str, obj: KubeObject) -> None:
        """One watch event: the object's newest state, or a kind's fresh listing."""
        with self._lock:
            if plural == PODS.plural and (event == RESYNC or (
                    event == ADDED and _to_place(obj))):
                self._arrived = True
            if event == RESYNC:
                stale = [key for key in self._changes if key[0] == plural]
                for key in stale:
                    del self._changes[key]
                self.coalesced += len(stale)
                self._resyncs[plural] = obj
            else:
                key = self._key(plural, obj)
                if self._changes.pop(key, None) is not None:
                    self.coalesced += 1
                self._changes[key] = (plural, event, obj)  # at the end: newest last
            self._lock.notify()

    def settle(self) -> None:
        """A binding finished: the loop should run a cycle (which settles it)."""
        with self._lock:
            self._settle = True
            self._lock.notify()

    def wake(self) -> None:
        """Wake a :meth:`take` waiting for something, with nothing to take (the loop is told
        to stop)."""
        with self._lock:
            self._lock.notify()

    def take(self, timeout: float | None) -> list[Change] | None:
        """Everything waiting (each kind's RESYNC first), after waiting up to ``timeout``
        seconds for something; None when nothing came (not even a settled binding)."""
        with self._lock:
            if not (self._resyncs or self._changes or self._settle):
                self._lock.wait(timeout)
            if not (self._resyncs or self._changes or self._settle):
                return None
            taken: list[Change] = [(plural, RESYNC, obj) for plural, obj in self._resyncs.items()]
            taken.extend(self._changes.values())
            self._resyncs, self._changes, self._settle = {}, {}, False
            self._arrived = False
            return taken

    def arrivals(self) -> bool:
        """Whether an unbound pod of Fluence's was added, or the pods listed again, since the
        last :meth:`take` (another scheduler's pods are not worth ending a cycle for)."""
        with self._lock:
            return self._arrived

    def __len__(self) -> int:
        """Objects (and listings) waiting to be applied."""
        with self._lock:
            return len(self._changes) + len(self._resyncs)

    def _key(self, plural: str, obj: KubeObject) -> tuple[Any, ...]:
        metadata = metadata_or_none(obj)
        if metadata is None or not metadata.get("name"):
            return (plural, "", next(self._unkeyed))  # unreadable: never merged, the view logs it
        return (plural, metadata.get("namespace") or "", metadata.get("name"),
                metadata.get("uid") or "")


def _to_place(pod: KubeObject) -> bool:
    """Whether an added pod is an unbound one of Fluence's (an unreadable one is not: the
    view logs it)."""
    try:
        return is_ours(pod) and not is_bound(pod)
    except (AttributeError, TypeError):
        return False
