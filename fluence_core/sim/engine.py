"""Discrete-event time: an event queue keyed by virtual seconds, and processes that sleep in it.

Most of the simulation is callbacks at a time (:meth:`Engine.at`). Code written
as a blocking loop over a :class:`~fluence_core.hybrid.sidecar.Clock` — the
real sidecar — runs as a :class:`Process`: a thread that holds the only right
to run while it works, and hands it back whenever it sleeps. Exactly one thread
runs at a time and every wake-up is an ordinary event, so a run is as
deterministic as a single-threaded one and never sleeps for real.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from typing import Any


class Stopped(BaseException):
    """Raised inside a process's sleep when the engine shuts down (not an ``Exception``,
    so the sidecar's own error handling cannot swallow it)."""


class Engine:
    """The event queue and the virtual clock."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._queue: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._serial = 0
        self._processes: list[Process] = []
        self.events = 0

    def at(self, when: float, action: Callable[..., Any], *args: Any) -> None:
        """Run ``action(*args)`` at virtual time ``when`` (never in the past)."""
        self._serial += 1
        heapq.heappush(self._queue, (max(when, self.now), self._serial, action, args))

    def after(self, delay: float, action: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay, action, *args)

    def pending(self) -> int:
        return len(self._queue)

    def step(self) -> bool:
        """Run the next event; False when there is none."""
        if not self._queue:
            return False
        when, _, action, args = heapq.heappop(self._queue)
        self.now = when
        self.events += 1
        action(*args)
        return True

    def next_time(self) -> float | None:
        return self._queue[0][0] if self._queue else None

    def spawn(self, target: Callable[[ProcessClock], Any], name: str,
              on_exit: Callable[[Process], None] | None = None) -> Process:
        """Start ``target(clock)`` as a process at the current time."""
        process = Process(self, target, name, on_exit)
        self._processes.append(process)
        self.at(self.now, process.resume)
        return process

    def shutdown(self) -> None:
        """Unwind every process still sleeping (their threads end)."""
        for process in self._processes:
            process.stop()
        self._processes.clear()
        self._queue.clear()


class ProcessClock:
    """The :class:`~fluence_core.hybrid.sidecar.Clock` a process sees."""

    def __init__(self, process: Process) -> None:
        self._process = process

    def now(self) -> float:
        return self._process.engine.now

    def sleep(self, seconds: float) -> None:
        self._process.sleep(seconds)


class Process:
    """A thread that runs only while the engine waits for it (see the module docstring)."""

    def __init__(self, engine: Engine, target: Callable[[ProcessClock], Any], name: str,
                 on_exit: Callable[[Process], None] | None) -> None:
        self.engine = engine
        self.name = name
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self._target = target
        self._on_exit = on_exit
        self._run = threading.Semaphore(0)
        self._yield = threading.Semaphore(0)
        self._stopping = False
        self._thread: threading.Thread | None = None

    def _main(self) -> None:
        self._run.acquire()
        try:
            if not self._stopping:
                self.result = self._target(ProcessClock(self))
        except Stopped:
            pass
        except BaseException as error:  # noqa: BLE001 (handed to the engine's thread)
            self.error = error
        finally:
            self.done = True
            self._yield.release()

    def resume(self) -> None:
        """Engine side: let the process run until it sleeps or ends."""
        if self.done:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=f"sim-{self.name}", daemon=True)
            self._thread.start()
        self._run.release()
        self._yield.acquire()
        if self.done:
            if self.error is not None:
                raise self.error
            if self._on_exit is not None and not self._stopping:
                self._on_exit(self)

    def sleep(self, seconds: float) -> None:
        """Process side: wake up ``seconds`` later in virtual time."""
        self.engine.at(self.engine.now + max(0.0, seconds), self.resume)
        self._yield.release()
        self._run.acquire()
        if self._stopping:
            raise Stopped()

    def stop(self) -> None:
        if self.done or self._thread is None:
            self.done = True
            return
        self._stopping = True
        self._run.release()
        self._yield.acquire()
        self._thread.join(timeout=5)
