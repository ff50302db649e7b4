"""Events about pods, posted off the scheduling and binding path.

kube-scheduler hands its events to a broadcaster that posts them from a
goroutine of its own, through a client whose rate limit is not the one its
bindings use; a slow or throttled event never delays a bind. The
:class:`EventRecorder` does the same with one thread (``background=True``,
``fluence up``), or posts at once (the default, so tests and the simulator
see every event as soon as the cycle returns). A full queue drops events with
a warning rather than hold anything up: an event is a courtesy, not state.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from fluence_core.kube.api import ClusterAPI
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.kube.meta import metadata_of

_Event = tuple[dict[str, Any], str, str, str]


class EventRecorder:
    """Posts core/v1 Events about objects, now or from a thread of its own."""

    def __init__(self, cluster: ClusterAPI, *, background: bool = False,
                 capacity: int = 1000) -> None:
        self.cluster = cluster
        self.background = background
        self.dropped = 0
        """Events not posted because the queue was full."""
        self._queue: queue.Queue[_Event] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def post(self, involved: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Post an Event about ``involved`` (its reference is taken now)."""
        event = (_reference(involved), type, reason, message)
        if not self.background:
            self._send(event)
            return
        self._ensure_thread()
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1
            if self.dropped % 100 == 1:
                logger.warning("event queue full: dropped %d events so far (latest: %s %s)",
                               self.dropped, reason, message)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued event was posted (or given up); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                done.wait(left)
        return True

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="events", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            event = self._queue.get()
            try:
                self._send(event)
            finally:
                self._queue.task_done()

    def _send(self, event: _Event) -> None:
        involved, type, reason, message = event
        try:
            self.cluster.post_event(involved, type, reason, message)
        except ApiError as error:
            metadata = involved["metadata"]
            logger.debug("cannot post %s on %s/%s: %s", reason, metadata.get("namespace"),
                         metadata.get("name"), error)
        except Exception:  # noqa: BLE001 - no event may stop the thread that posts them
            logger.exception("posting %s failed", reason)


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What an Event needs of its object, copied so later changes to the object don't leak in."""
    metadata = metadata_of(obj)
    return {
        "apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
        "metadata": {key: metadata[key] for key in ("name", "namespace", "uid", "resourceVersion")
                     if key in metadata},
    }
