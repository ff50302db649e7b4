"""``fluence up``'s loop stops within a second on a real API server (skipped without
KUBEBUILDER_ASSETS).

On the real client a watch blocks in a streaming HTTP response until an event comes or
the request's timeout ends; stopping must close those responses, not wait them out.
"""

from __future__ import annotations

import threading
import time

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import wait_for

pytestmark = pytest.mark.e2e


def _watchers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("watch-") and t.is_alive()}


def test_the_scheduler_and_its_watches_stop_within_a_second(kube: KubeCluster) -> None:
    scheduler = Scheduler(kube, load_settings(watch_chunk=600))
    scheduler.start()
    before = _watchers()
    stop = threading.Event()
    loop = threading.Thread(target=scheduler.run, args=(stop,), kwargs={"idle": 600},
                            daemon=True, name="e2e-stop-loop")
    loop.start()
    wait_for(lambda: len(_watchers() - before) >= 3, "the watch threads to start",
             timeout=30, every=0.05)
    time.sleep(1.0)  # their watch requests are open and waiting for events
    ours = _watchers() - before
    started = time.monotonic()
    stop.set()
    loop.join(10)
    took = time.monotonic() - started
    assert not loop.is_alive(), "the loop still ran 10 s after stop"
    assert took < 1.0, f"the loop and its watches took {took:.2f} s to stop"
    assert not [t.name for t in ours if t.is_alive()]
