"""The sidecar: release the workers when the scout's quantum task is about to run.

This is the two-queue problem's answer. The workers of a shared-coordination group wait
behind a scheduling gate (holding no node) while the scout's task sits in the vendor
queue; the sidecar, next to the scout, watches that task and has the workers released
when it is about to run (:class:`Sidecar` lists the steps).

It holds no Kubernetes rights: its releases are reports to Fluence
(:mod:`~fluence_core.hybrid.reporter`: HTTPS to the webhook's endpoint with the pod's
projected token, docs/scout-report.md), and Fluence stamps and ungates the workers
itself. The release report is sent until it gets through.

Failure modes are explicit and fail open, so workers are never stranded: a task not
found in time, or one that failed with no result, still ungates the workers, with
``scout-status`` saying so, and the sidecar exits non-zero. Observe-only mode records
the queue series and ungates nothing. It keeps time through a :class:`Clock`, so tests
run it in virtual time; given a :class:`~fluence_core.kube.api.ClusterAPI` instead of a
reporter (``fluence sim``, tests) it applies its reports in process.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fluence_core import names
from fluence_core.kube.api import ClusterAPI
from fluence_core.log import logger
from fluence_core.hybrid.release import Report
from fluence_core.hybrid.reporter import LocalReporter, Reporter, ReportError
from fluence_core.runtime.provider import Backend, Provider, attributes_from_env, resolve_provider

SERIES_FILE = "queue-series.jsonl"


class Clock(Protocol):
    """Monotonic seconds and a way to wait: real in a pod, virtual in tests and ``fluence sim``."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class VirtualClock:
    """Time that moves only when someone sleeps; ``on_sleep`` lets a test act at a moment."""

    def __init__(self, start: float = 0.0, on_sleep: Callable[[float], None] | None = None) -> None:
        self.t = start
        self.on_sleep = on_sleep
        self.slept = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.slept += seconds
        if self.on_sleep is not None:
            self.on_sleep(self.t)


class Outcome(str, enum.Enum):
    READY = names.SCOUT_STATUS_READY
    NO_RESULT = names.SCOUT_STATUS_NO_RESULT
    NOT_FOUND = names.SCOUT_STATUS_NOT_FOUND
    OBSERVED = names.SCOUT_STATUS_OBSERVED


@dataclass(frozen=True)
class SidecarConfig:
    """Who the scout is and how patient to be (normally from
    :class:`~fluence_core.settings.Settings`)."""

    pod_name: str
    namespace: str
    pod_uid: str
    backend: Backend
    poll_interval: float = 10.0
    ungate_position: int = 1
    find_timeout: float = 600.0
    worker_timeout: float = 0.0
    observe_only: bool = False
    gate: str = names.QUANTUM_GATE
    runtime_dir: Path | None = None

    @classmethod
    def from_settings(cls, settings: Any, backend: Backend) -> "SidecarConfig":
        missing = [f"pod_{n}" for n in ("name", "namespace", "uid")
                   if not getattr(settings.pod, n)]
        if missing:
            from fluence_core.errors import SettingsError

            raise SettingsError(
                "the sidecar needs "
                + ", ".join(names.SETTINGS_ENV_PREFIX + m.upper() for m in missing)
                + " (downward API)"
            )
        pod, sidecar = settings.pod, settings.sidecar
        return cls(
            pod_name=pod.name, namespace=pod.namespace, pod_uid=pod.uid,
            backend=backend, poll_interval=sidecar.poll_interval,
            ungate_position=sidecar.ungate_position, find_timeout=sidecar.find_task_timeout,
            worker_timeout=sidecar.worker_timeout, observe_only=sidecar.observe_only,
            gate=settings.hybrid.quantum_gate, runtime_dir=settings.hybrid.runtime_dir,
        )


@dataclass
class SidecarResult:
    outcome: Outcome
    job_id: str | None = None
    session: str | None = None
    ungated: list[str] = field(default_factory=list)
    series: list[tuple[float, int | None]] = field(default_factory=list)
    workers_finished: bool = False

    @property
    def exit_code(self) -> int:
        return 0 if self.outcome in (Outcome.READY, Outcome.OBSERVED) else 1


class Sidecar:
    """One run of the sidecar for one scout:

    1. finds the scout's task through the provider (by the pod-uid tag, or the
       interceptor's job record), giving up after ``find_task_timeout``;
    2. polls it every ``sidecar_poll_interval`` seconds, logging each change of
       queue position;
    3. when the task is at or under ``ungate_position``, or already running or
       finished, stamps the job id, session and the scout's backend onto every gated
       worker and removes *the named gate* from it, in one JSON patch per pod
       (:mod:`fluence_core.hybrid.release`);
    4. waits for the workers to finish (``worker_timeout``, 0 = forever), ungating
       late arrivals too, then writes the release marker the scout's session close
       waits for.
    """

    def __init__(self, reporter: Reporter | ClusterAPI, provider: Provider,
                 config: SidecarConfig, clock: Clock | None = None) -> None:
        if not isinstance(reporter, Reporter):
            reporter = LocalReporter(reporter, config.namespace, config.pod_name, config.gate)
        self.reporter = reporter
        self.provider = provider
        self.config = config
        self.clock = clock or RealClock()
        self.result = SidecarResult(Outcome.NOT_FOUND)
        self._found_told = False

    # -- the whole run -----------------------------------------------------

    def run(self) -> SidecarResult:
        cfg = self.config
        logger.info("sidecar for %s/%s (uid %s) on %s via %s%s", cfg.namespace, cfg.pod_name,
                    cfg.pod_uid, cfg.backend.name or "?", self.provider.name,
                    " (observe only)" if cfg.observe_only else "")
        task = self._find_task()
        if task is None:
            logger.error("task of pod %s not found within %ss", cfg.pod_uid, cfg.find_timeout)
            return self._finish(Outcome.NOT_FOUND)
        self.result.job_id = self.provider.job_id(task)
        logger.info("found task %s", self.result.job_id)
        outcome = self._watch_queue(task)
        return self._finish(outcome, task)

    def _finish(self, outcome: Outcome, task: Any = None) -> SidecarResult:
        self.result.outcome = outcome
        if task is not None:
            try:
                self.result.session = self.provider.session(task)
            except Exception as error:
                logger.warning("session of task %s unknown: %s", self.result.job_id, error)
        if outcome is not Outcome.OBSERVED:
            self.ungate_workers()
            if outcome is Outcome.READY:
                self.result.workers_finished = self._wait_for_workers()
            else:
                logger.error("workers released without a result (%s); exiting non-zero",
                             outcome.value)
            self._release_scout()
        self._tell(Report(names.REPORT_FINAL, outcome.value, self.result.job_id,
                          self.result.session, workers_finished=self.result.workers_finished))
        return self.result

    # -- steps -------------------------------------------------------------

    def _find_task(self) -> Any | None:
        cfg = self.config
        deadline = None if cfg.find_timeout == 0 else self.clock.now() + cfg.find_timeout
        while True:
            try:
                task = self.provider.find_my_task(cfg.pod_uid, cfg.backend, cfg.poll_interval)
            except Exception as error:
                logger.warning("looking for the task failed (will retry): %s", error)
                task = None
            if task is not None:
                return task
            if deadline is not None and self.clock.now() >= deadline:
                return None
            self.clock.sleep(cfg.poll_interval)

    def _watch_queue(self, task: Any) -> Outcome:
        cfg = self.config
        last: object = object()
        while True:
            try:
                task = self.provider.refresh(task)
                position = self.provider.queue_position(task)
                failed = self.provider.task_failed(task)
                ready = self.provider.is_ready(task, cfg.ungate_position)
            except Exception as error:
                logger.warning("polling task %s failed (will retry): %s", self.result.job_id, error)
                self.clock.sleep(cfg.poll_interval)
                continue
            if not self._found_told:
                self._found_told = True
                self._tell(Report(names.REPORT_FOUND, job_id=self.result.job_id,
                                  session=self._session(task), position=position))
            if position != last:
                logger.info("task %s queue position %s -> %s", self.result.job_id,
                            "?" if not isinstance(last, (int, type(None))) else last, position)
                last = position
                self.result.series.append((self.clock.now(), position))
                self._record_series(position)
            if failed:
                logger.error("task %s failed with no result", self.result.job_id)
                return Outcome.OBSERVED if cfg.observe_only else Outcome.NO_RESULT
            if cfg.observe_only:
                if ready and position is None:  # out of the queue: running or done
                    return Outcome.OBSERVED
            elif ready:
                logger.info("task %s is ready (position %s <= %s or running)", self.result.job_id,
                            position, cfg.ungate_position)
                return Outcome.READY
            self.clock.sleep(cfg.poll_interval)

    def _record_series(self, position: int | None) -> None:
        directory = self.config.runtime_dir
        if directory is None:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with (directory / SERIES_FILE).open("a") as out:
                out.write(json.dumps({"t": self.clock.now(), "job_id": self.result.job_id,
                                      "position": position}) + "\n")
        except OSError as error:
            logger.warning("cannot record the queue series: %s", error)

    # -- reports to Fluence ------------------------------------------------

    def _session(self, task: Any) -> str | None:
        try:
            return self.provider.session(task)
        except Exception as error:
            logger.debug("session of task %s not known yet: %s", self.result.job_id, error)
            return None

    def _tell(self, report: Report) -> dict[str, Any] | None:
        """Send a report once; a failure is logged (only the release must get through)."""
        try:
            return self.reporter.report(report.event, report.payload())
        except ReportError as error:
            logger.warning("%s report not delivered: %s", report.event, error)
            return None

    def _release(self) -> dict[str, Any]:
        """The release report, sent until it gets through: workers are never stranded."""
        report = Report(names.REPORT_RELEASE, self.result.outcome.value, self.result.job_id,
                        self.result.session)
        while True:
            reply = self._tell(report)
            if reply is not None:
                return reply
            self.clock.sleep(self.config.poll_interval)

    def ungate_workers(self) -> list[str]:
        """Ask Fluence to stamp and ungate every worker still gated; who was ungated now."""
        done = [str(name) for name in self._release().get("ungated") or []]
        self.result.ungated.extend(done)
        return done

    def _wait_for_workers(self) -> bool:
        cfg = self.config
        deadline = None if cfg.worker_timeout == 0 else self.clock.now() + cfg.worker_timeout
        while True:
            # Each poll is a release report: late arrivals (a Job replacing a pod) go too.
            report = Report(names.REPORT_RELEASE, self.result.outcome.value, self.result.job_id,
                            self.result.session)
            reply = self._tell(report)
            if reply is None:
                running = ["?"]
            else:
                self.result.ungated.extend(str(n) for n in reply.get("ungated") or [])
                running = [str(n) for n in reply.get("running") or []]
            if not running:
                logger.info("all workers finished")
                return True
            if deadline is not None and self.clock.now() >= deadline:
                logger.warning("workers still running after %ss: %s", cfg.worker_timeout,
                               ", ".join(running))
                return False
            self.clock.sleep(cfg.poll_interval)

    def _release_scout(self) -> None:
        """Tell the scout's session close it may go ahead (the marker the interceptor waits for)."""
        directory = self.config.runtime_dir
        if directory is None:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / names.RELEASE_MARKER_FILE).write_text(self.result.outcome.value + "\n")
        except OSError as error:
            logger.warning("cannot write the release marker: %s", error)


def sidecar_from_env(settings: Any,
                     reporter: Reporter | ClusterAPI | Callable[[], Reporter | ClusterAPI],
                     providers: list[Provider], *, environ: Mapping[str, str] | None = None,
                     clock: Clock | None = None) -> Sidecar:
    """The sidecar ``fluence sidecar`` runs: the provider resolved from the ``FLUXION_*``
    variables (downward API from the backend annotations the scheduler wrote), the rest
    from ``settings`` (``FLUENCE_*``, as the webhook injected them). ``reporter`` may be a
    factory, called only once the configuration is known to be complete."""
    attributes = attributes_from_env(environ)
    provider = resolve_provider(attributes, providers)
    config = SidecarConfig.from_settings(settings, Backend.from_attributes(attributes))
    if not isinstance(reporter, (Reporter, ClusterAPI)):
        reporter = reporter()
    return Sidecar(reporter, provider, config, clock)
