"""``fluence up``'s loop stops at once: its watches are cancelled, not left to run out.

A watch call of ``fluence up`` lasts ``FLUENCE_WATCH_CHUNK`` seconds (60 by default) and
the loop waits up to ``idle`` seconds for a change. Setting the stop event must end the
loop and every watch thread within a second, whatever those two say, so a scheduler that
lost its Lease lets go of the API server at once.
"""

from __future__ import annotations

import threading
import time

from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import wait_for
from tests.scheduler.conftest import node


def _watchers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("watch-") and t.is_alive()]


def test_stop_ends_the_loop_and_its_watch_threads_within_a_second() -> None:
    cluster = FakeCluster()
    cluster.create("nodes", node("n0", cpu=4))
    scheduler = Scheduler(cluster, load_settings(watch_chunk=600))
    scheduler.start()
    before = set(_watchers())
    stop = threading.Event()
    loop = threading.Thread(target=scheduler.run, args=(stop,), kwargs={"idle": 600},
                            daemon=True, name="test-loop")
    loop.start()
    wait_for(lambda: len(set(_watchers()) - before) >= 2, "the watch threads to start",
             timeout=10, every=0.01)
    ours = set(_watchers()) - before
    started = time.monotonic()
    stop.set()
    loop.join(5)
    took = time.monotonic() - started
    assert not loop.is_alive(), "the loop still ran 5 s after stop"
    assert took < 1.0, f"the loop took {took:.2f} s to stop"
    assert not [t.name for t in ours if t.is_alive()]


def test_a_loop_that_ends_by_an_error_cancels_its_watches_too() -> None:
    cluster = FakeCluster()
    cluster.create("nodes", node("n0", cpu=4))
    scheduler = Scheduler(cluster, load_settings(watch_chunk=600))
    scheduler.start()
    before = set(_watchers())
    ours: set[threading.Thread] = set()

    def broken() -> None:
        ours.update(set(_watchers()) - before)
        if ours:
            raise RuntimeError("a cycle broke")

    scheduler.schedule_once = broken  # type: ignore[method-assign]
    stop = threading.Event()
    try:
        scheduler.run(stop, idle=0.01)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the broken cycle's error did not reach the caller")
    assert ours
    wait_for(lambda: not [t for t in ours if t.is_alive()], "the watch threads to end",
             timeout=1, every=0.01)
