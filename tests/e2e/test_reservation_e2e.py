"""A waiting gang is placed under a stream of later small pods (skipped without
KUBEBUILDER_ASSETS).

Scaled down from what tenants saw (a gang of 8 x 8 cpu never placed while another tenant
streamed 4-cpu pods): 4 nodes of 8 cpu, a gang of 4 x 8 cpu, and 4-cpu pods that each
run a few seconds (the test finishes them: no kubelet) while more keep coming. Every
node that frees would go to a later small pod; with reservations the gang takes its room
as it frees, once it has waited ``reserve_after_seconds``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from tests.e2e.test_scheduler_e2e import Run, running

pytestmark = pytest.mark.e2e

WAIT = 5.0
"""``reserve_after_seconds`` here: scaled down with the rest."""
RUN = 3.0
"""How long each small pod runs once bound."""
BOUND = 30.0
"""The gang's time to place, scaled down from issue 39's goal of 60 s."""


@pytest.fixture
def run(kube: KubeCluster, kube_namespace: str) -> Iterator[Run]:
    with running(Run(kube, kube_namespace)) as harness:
        yield harness


def test_a_waiting_gang_is_placed_within_the_bound_under_a_stream_of_small_pods(
        run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(4):
        run.node(f"n{i}", cpu=8)
    monkeypatch.setenv("FLUENCE_RESERVE_AFTER_SECONDS", str(WAIT))
    run.start_scheduler(load_settings())
    names = (f"small-{i:04d}" for i in itertools.count())
    bound_at: dict[str, float] = {}
    pending: set[str] = set()
    for _ in range(8):  # the cluster full of small pods before the gang comes
        name = next(names)
        run.pod(name, "4")
        pending.add(name)
    run.wait(lambda: all(run.node_of(p) for p in pending), "the first small pods to be bound")
    run.gang("big", 4, "8")
    created = time.monotonic()
    placed_after = None
    while time.monotonic() - created < BOUND:
        now = time.monotonic()
        for pod in run.kube.list("pods", run.ns).items:
            name = pod["metadata"]["name"]
            if not name.startswith("small-"):
                continue
            if pod["spec"].get("nodeName") and name in pending:
                pending.discard(name)
                bound_at[name] = now
        for name, since in list(bound_at.items()):
            if now - since >= RUN:
                run.finish(name)
                del bound_at[name]
        while len(pending) < 2:  # the stream: a later small pod always waits
            name = next(names)
            run.pod(name, "4")
            pending.add(name)
        if all(run.node_of(f"big-{i}") for i in range(4)):
            placed_after = time.monotonic() - created
            break
        time.sleep(0.2)
    assert placed_after is not None, (
        f"the gang was not placed within {BOUND:g} s while small pods kept coming")
    print(f"gang placed {placed_after:.1f} s after it was created")
