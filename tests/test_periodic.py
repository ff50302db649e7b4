"""The periodic tasks (orphan sweep, PodGroup repair, backend figures) share one loop."""

from __future__ import annotations

import logging
import threading

import pytest

from fluence_core.kube.errors import ApiError
from fluence_core.periodic import Periodic


class Ticking(Periodic):
    """Fails its first ticks as scripted, then counts."""

    failure = "ticking failed"

    def __init__(self, interval: float, errors: list[Exception], **options: bool) -> None:
        super().__init__(interval, **options)
        self.errors = errors
        self.ticks = 0
        self.reached = threading.Event()

    def tick(self) -> object:
        self.ticks += 1
        if self.errors:
            raise self.errors.pop(0)
        self.reached.set()
        return None


def test_a_failing_tick_is_logged_and_the_next_one_runs(caplog) -> None:
    task = Ticking(0.01, [ApiError(500, "etcd timed out"), KeyError("spec")])
    task.start()
    try:
        assert task.reached.wait(5)
        assert task.running
    finally:
        task.stop()
    assert not task.running and task.ticks >= 3
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors[:2]] == ["ticking failed: 500: etcd timed out",
                                                  "ticking failed: 'spec'"]
    assert not errors[0].exc_info  # an API error says it all
    assert errors[1].exc_info  # anything else is a bug: its stack is logged


@pytest.mark.parametrize("at_start", [True, False])
def test_the_first_tick_comes_at_start_only_when_asked(at_start: bool) -> None:
    task = Ticking(60, [], at_start=at_start)
    task.start()
    try:
        assert task.reached.wait(5 if at_start else 0.2) is at_start
    finally:
        task.stop()


def test_interval_zero_never_starts_and_a_stopped_task_starts_again() -> None:
    off = Ticking(0, [], at_start=True)
    off.start()
    assert not off.running and off.ticks == 0
    task = Ticking(60, [], at_start=True)
    task.start()
    assert task.reached.wait(5)
    task.stop()
    task.reached.clear()
    task.start()
    try:
        assert task.reached.wait(5) and task.ticks == 2
    finally:
        task.stop()
