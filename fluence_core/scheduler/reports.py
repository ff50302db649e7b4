"""The status patches that say why a group waits, written behind the bindings.

A group that cannot be placed is told so on each of its pods (``PodScheduled=False``)
and on its PodGroup. These writes draw on the same client budget as the bindings
(``FLUENCE_KUBE_QPS``), and one tenant's burst of pods that cannot fit asks for one
write per pod at once. Written from the scheduling loop, they held up every other
tenant's pods for as long as the budget took to pay for them; written ahead of
bindings from a queue, they would still delay the binds queued behind them.

:class:`ReportWriter` writes them from a thread of its own (``background=True``,
``fluence up``), one at a time, and only while no binding is waiting
(:attr:`ReportWriter.busy`), or once a report has waited ``patience`` seconds for
bindings to pause, so a steady stream of binds never silences it. It keeps one
report per object, the newest: a pod told two reasons before the first was written
is patched once. Before a group is bound its reports still queued are withdrawn
(:meth:`ReportWriter.withdraw`), so a pod is never told it waits after its binding.
Without ``background`` (the default: tests and the simulator) each report is written
at once, as the cycle makes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fluence_core.kube.api import ClusterAPI, Resource
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger

ObjectKey = tuple[str, str, str]
"""(plural, namespace, name) of the object a report patches."""

PAUSE = 0.02
"""Seconds the writer waits before it looks again whether the bindings paused."""


@dataclass(frozen=True)
class _Report:
    group: str
    resource: Resource
    namespace: str
    name: str
    patch: Mapping[str, Any]


class ReportWriter:
    """Patches the status of waiting pods and PodGroups, now or behind the bindings."""

    def __init__(self, cluster: ClusterAPI, *, background: bool = False, patience: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.background = background
        self.patience = patience
        self.clock = clock
        self.busy: Callable[[], bool] = lambda: False
        """Whether a binding is waiting or in flight (set by the scheduler): reports wait."""
        self._pending: dict[ObjectKey, _Report] = {}
        """The newest report per object, oldest object first."""
        self._writing: _Report | None = None
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def write(self, group: str, resource: Resource, namespace: str, name: str,
              patch: Mapping[str, Any]) -> None:
        """Patch the status of ``name`` for ``group``: now, or queued in the background (a
        report still queued for the same object is replaced, keeping its place)."""
        report = _Report(group, resource, namespace, name, patch)
        if not self.background:
            self._send(report)
            return
        with self._changed:
            self._pending[(resource.plural, namespace, name)] = report
            self._ensure_thread()
            self._changed.notify_all()

    def withdraw(self, group: str) -> None:
        """``group`` is about to be bound: drop its queued reports, and wait until one of its
        reports being written is done (a report patched after the binding would say the pod
        still waits)."""
        if not self.background:
            return
        with self._changed:
            for key in [k for k, r in self._pending.items() if r.group == group]:
                del self._pending[key]
            while self._writing is not None and self._writing.group == group:
                self._changed.wait()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued report was written (or given up); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self._pending or self._writing is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def __len__(self) -> int:
        """Reports queued, not yet being written."""
        with self._changed:
            return len(self._pending)

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="reports", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._changed:
                while not self._pending:
                    self._changed.wait()
            self._behind_bindings()
            with self._changed:
                if not self._pending:
                    continue  # withdrawn meanwhile
                report = self._pending.pop(next(iter(self._pending)))
                self._writing = report
            try:
                self._send(report)
            except Exception:  # noqa: BLE001 - no report may stop the thread that writes them
                logger.exception("reporting on %s %s/%s failed", report.resource.plural,
                                 report.namespace, report.name)
            finally:
                with self._changed:
                    self._writing = None
                    self._changed.notify_all()

    def _behind_bindings(self) -> None:
        """Wait while bindings are waiting, at most ``patience`` seconds."""
        deadline = self.clock() + self.patience
        while self.clock() < deadline:
            try:
                if not self.busy():
                    return
            except Exception:  # noqa: BLE001 - a broken check never stops the reports
                logger.exception("cannot tell whether bindings wait; writing the report")
                return
            time.sleep(PAUSE)

    def _send(self, report: _Report) -> None:
        try:
            self.cluster.patch_status(report.resource, report.name, dict(report.patch),
                                      report.namespace)
        except ApiError as error:
            logger.debug("cannot report on %s %s/%s: %s", report.resource.plural,
                         report.namespace, report.name, error)
