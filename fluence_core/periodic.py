"""A task a Fluence process repeats on a thread of its own: the webhook's orphan sweep and
PodGroup repair (beside its server, :class:`~fluence_core.webhook.transport.server.WebhookServer`'s
``loops``) and the scheduler's backend figures refresh (while it leads).

Why one class: each must outlive any single failure (an API error, an odd object) and
start and stop with what it serves; written out separately, the copies had drifted (one
logged a traceback for an API error, one could not be started again). It lives below
both the webhook and the runtime, which must not import each other.

Each task keeps its own list. The repair wants the unscheduled grouped pods (the API
server selects them: ``spec.nodeName=``), the sweep the shared groups' scouts and workers,
running scouts included. One list for both would be every grouped pod in the cluster,
each running gang's included, at the shorter of two independent intervals.
"""

from __future__ import annotations

import threading

from fluence_core.kube.errors import ApiError
from fluence_core.log import logger


class Periodic:
    """Calls :meth:`tick` every ``interval`` seconds on a daemon thread, between :meth:`start`
    and :meth:`stop`; with ``at_start`` also once as it starts. Never with ``interval`` 0.

    A tick that raises is logged, an API error without its traceback (the message says it
    all; anything else is a bug worth the stack), and the next tick runs as planned.
    """

    thread_name = "periodic"
    failure = "a periodic task failed"
    """What the log line says before the error."""

    def __init__(self, interval: float, *, at_start: bool = False) -> None:
        self.interval = interval
        self.at_start = at_start
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> object:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.interval <= 0 or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.thread_name)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        if self.at_start:
            self._tick()
        while not self._stop.wait(self.interval):
            self._tick()

    def _tick(self) -> None:
        try:
            self.tick()
        except Exception as error:  # noqa: BLE001 - a tick fails, the next one runs
            logger.error("%s: %s", self.failure, error, exc_info=not isinstance(error, ApiError))
