"""Virtual time: events in order, processes that sleep in it, and the vendor queue model."""

from __future__ import annotations

from fluence_core.sim.engine import Engine, ProcessClock
from fluence_core.sim.scenario import BackendModel, Outages, Range
from fluence_core.sim.vendor import BackendQueue


def test_events_run_in_time_order_and_ties_in_arrival_order() -> None:
    engine, seen = Engine(), []
    engine.at(5, seen.append, "late")
    engine.at(1, seen.append, "a")
    engine.at(1, seen.append, "b")
    while engine.step():
        pass
    assert seen == ["a", "b", "late"] and engine.now == 5


def test_processes_interleave_by_virtual_time_without_real_sleeps() -> None:
    engine, seen = Engine(), []

    def worker(tag: str, period: float) -> object:
        def run(clock: ProcessClock) -> str:
            for _ in range(3):
                clock.sleep(period)
                seen.append((clock.now(), tag))
            return tag
        return run

    done = []
    engine.spawn(worker("fast", 1.0), "fast", on_exit=lambda p: done.append(p.result))
    engine.spawn(worker("slow", 2.5), "slow", on_exit=lambda p: done.append(p.result))
    while engine.step():
        pass
    assert seen == [
        (1.0, "fast"),
        (2.0, "fast"),
        (2.5, "slow"),
        (3.0, "fast"),
        (5.0, "slow"),
        (7.5, "slow"),
    ]
    assert done == ["fast", "slow"]


def test_shutdown_unwinds_a_process_that_would_sleep_forever() -> None:
    engine = Engine()

    def forever(clock: ProcessClock) -> None:
        while True:
            clock.sleep(10)

    process = engine.spawn(forever, "forever")
    for _ in range(5):
        engine.step()
    engine.shutdown()
    assert process.done and process.error is None


def test_a_task_moves_up_the_queue_then_runs() -> None:
    model = BackendModel(depth=5, service=Range(min=10, max=10), task_overhead=3)
    queue = BackendQueue("b", model, seed=1)
    task = queue.submit(0.0, "uid", shots=100)
    ahead = len(task.ahead_starts)
    assert task.start == 10 * ahead and task.done == task.start + 3
    assert task.position(0.0) == ahead if ahead else task.position(0.0) is None
    if ahead:
        assert task.position(task.start - 1) == 1
    assert task.position(task.start) is None and task.state(task.done) == "COMPLETED"


def test_an_outage_pauses_the_queue() -> None:
    model = BackendModel(depth=0, task_overhead=100,
                         outages=Outages(every=50, duration=Range(min=1000, max=1000)))
    queue = BackendQueue("b", model, seed=2)
    task = queue.submit(0.0, "uid", shots=1)
    assert task.done >= 1100  # at least one 1000 s outage fell inside its 100 s run
    assert not all(queue.online_at(t) for t in range(0, int(task.done), 10))
