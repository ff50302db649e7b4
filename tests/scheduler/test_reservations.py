"""fluence_core.scheduler.reservations: a gang that waited too long holds the room it will
take; later pods backfill into it only if they end before it starts.

Each test runs on the embedded matcher, and on Fluxion when ``FLUENCE_FLUXION_LIB`` names
flux-sched's library (the plugin takes over the scheduler's matcher then)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import PODGROUPS
from tests.scheduler.conftest import Harness, node, pod, pod_group

WAIT = 30.0
"""``reserve_after_seconds`` in these tests (its default)."""


@pytest.fixture(params=["embedded", "fluxion"], autouse=True)
def matcher_kind(request: pytest.FixtureRequest,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    library = os.environ.get("FLUENCE_FLUXION_LIB")
    if request.param == "embedded":
        monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)
    elif not library:
        pytest.skip("FLUENCE_FLUXION_LIB is not set (path to flux-sched's libreapi_cli.so)")
    monkeypatch.setenv("FLUENCE_RESERVE_AFTER_SECONDS", str(WAIT))
    yield request.param


def _gang(name: str, size: int, cpu: str, **more: Any) -> list[dict[str, Any]]:
    return [pod_group(name, size), *(pod(f"{name}-{i}", cpu, group=name, **more)
                                     for i in range(size))]


def _full_cluster(harness_factory: Callable[..., Harness], *holders: dict[str, Any]) -> Harness:
    """Two 4-cpu nodes filled by ``holders`` (placed by the scheduler), then a gang ``big``
    of 2 x 4 cpu that has to wait for both."""
    h = harness_factory(node("n0"), node("n1"), *holders)
    h.cycle()
    assert all(h.node_of(p["metadata"]["name"]) for p in holders)
    h.add(*_gang("big", 2, "4"))
    return h


def test_a_gang_waiting_past_the_threshold_keeps_freed_room_from_a_later_pod(
        harness_factory: Callable[..., Harness], matcher_kind: str) -> None:
    h = _full_cluster(harness_factory, pod("hold-0", "4"), pod("hold-1", "4"))
    h.cycle()
    h.add(pod("small-0", "4"))
    h.finish("hold-0")
    h.cycle(after=WAIT)
    assert h.node_of("small-0") is None, "hold-0's node is the gang's once it waited enough"
    assert h.node_of("big-0") is None
    h.finish("hold-1")
    h.cycle(after=1)
    assert {h.node_of("big-0"), h.node_of("big-1")} == {"n0", "n1"}
    assert h.node_of("small-0") is None


def test_before_the_threshold_freed_room_still_goes_to_the_later_pod(
        harness_factory: Callable[..., Harness]) -> None:
    h = _full_cluster(harness_factory, pod("hold-0", "4"), pod("hold-1", "4"))
    h.cycle(after=1)
    h.add(pod("small-0", "4"))
    freed = h.node_of("hold-0")
    h.finish("hold-0")
    h.cycle(after=1)
    assert h.node_of("small-0") == freed


def test_zero_turns_reservations_off(harness_factory: Callable[..., Harness],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_RESERVE_AFTER_SECONDS", "0")
    h = _full_cluster(harness_factory, pod("hold-0", "4"), pod("hold-1", "4"))
    h.cycle()
    h.add(pod("small-0", "4"))
    freed = h.node_of("hold-0")
    h.finish("hold-0")
    h.cycle()
    assert h.node_of("small-0") == freed, "the gang starves: what frees goes to the small pod"


def test_a_pod_that_ends_before_the_reservation_starts_backfills_into_its_room(
        harness_factory: Callable[..., Harness]) -> None:
    h = _full_cluster(harness_factory, pod("hold-0", "4", activeDeadlineSeconds=100),
                      pod("hold-1", "4", activeDeadlineSeconds=1000))
    h.cycle()
    h.add(pod("short", "4", activeDeadlineSeconds=300))
    freed = h.node_of("hold-0")
    h.finish("hold-0")
    h.cycle(after=WAIT)
    assert h.node_of("short") == freed, "it leaves long before hold-1's walltime runs out"


def test_a_pod_without_a_walltime_never_backfills(
        harness_factory: Callable[..., Harness]) -> None:
    h = _full_cluster(harness_factory, pod("hold-0", "4", activeDeadlineSeconds=100),
                      pod("hold-1", "4", activeDeadlineSeconds=1000))
    h.cycle()
    h.add(pod("endless", "4"))
    h.finish("hold-0")
    h.cycle(after=WAIT)
    assert h.node_of("endless") is None


def test_a_pod_that_would_outlast_the_reservations_start_does_not_backfill(
        harness_factory: Callable[..., Harness]) -> None:
    h = _full_cluster(harness_factory, pod("hold-0", "4", activeDeadlineSeconds=100),
                      pod("hold-1", "4", activeDeadlineSeconds=1000))
    h.cycle()
    h.add(pod("long", "4", activeDeadlineSeconds=5000))
    h.finish("hold-0")
    h.cycle(after=WAIT)
    assert h.node_of("long") is None


def test_a_higher_priority_pod_may_use_the_reserved_room(
        harness_factory: Callable[..., Harness]) -> None:
    h = _full_cluster(harness_factory, pod("hold-0", "4"), pod("hold-1", "4"))
    h.cycle()
    h.add(pod("urgent", "4", priority=100))
    freed = h.node_of("hold-0")
    h.finish("hold-0")
    h.cycle(after=WAIT)
    assert h.node_of("urgent") == freed


def test_the_reservation_is_written_on_the_podgroup_and_removed_once_placed(
        harness_factory: Callable[..., Harness]) -> None:
    h = _full_cluster(harness_factory, pod("hold-0", "4", activeDeadlineSeconds=100),
                      pod("hold-1", "4", activeDeadlineSeconds=1000))
    h.cycle()
    h.finish("hold-0")
    h.cycle(after=WAIT)
    written = h.cluster.get(PODGROUPS, "big", "default")["metadata"]["annotations"]
    record = json.loads(written[names.RESERVATION_ANNOTATION])
    assert {n: room["cores"] for n, room in record["nodes"].items()} == {"n0": 4, "n1": 4}
    assert record["start"] is not None, "both holders have a walltime: the start is known"
    h.finish("hold-1")
    h.cycle(after=1)
    assert h.node_of("big-0") is not None
    annotations = h.cluster.get(PODGROUPS, "big", "default")["metadata"].get("annotations") or {}
    assert names.RESERVATION_ANNOTATION not in annotations


def test_a_gang_reserves_the_nodes_whose_holders_end_first(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0"), node("n1"), node("n2"), node("tiny", cpu=2),
                        pod("hold-0", "4", activeDeadlineSeconds=5000),
                        pod("hold-1", "4", activeDeadlineSeconds=100),
                        pod("hold-2", "4", activeDeadlineSeconds=200), pod("z-bit", "2"))
    h.cycle()
    ends = {h.node_of(f"hold-{i}"): i for i in range(3)}
    h.add(*_gang("big", 2, "4"))
    h.cycle()
    h.finish("z-bit")  # a change, so the gang is tried again: its room is not on tiny
    h.cycle(after=WAIT)
    record = json.loads(h.cluster.get(PODGROUPS, "big", "default")["metadata"]["annotations"]
                        [names.RESERVATION_ANNOTATION])
    assert {ends[n] for n in record["nodes"]} == {1, 2}, "not the node held for 5000 s"


def test_past_the_depth_only_the_first_groups_in_the_queue_hold_reservations(
        harness_factory: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_RESERVE_DEPTH", "1")
    h = _full_cluster(harness_factory, pod("hold-0", "4", priority=10),
                      pod("hold-1", "4", priority=10))  # no victims for urgent
    h.cycle()
    h.add(*_gang("urgent", 2, "4", priority=10))
    h.finish("hold-0")
    h.cycle(after=WAIT)
    reservations = h.scheduler.cycle.reservations.by_group
    assert list(reservations) == ["default/big"], "urgent has not waited long enough yet"
    h.add(node("spare", cpu=1))  # a change: both gangs are tried again
    h.cycle(after=WAIT)
    assert list(reservations) == ["default/urgent"], "urgent comes first in the queue"
    annotations = h.cluster.get(PODGROUPS, "big", "default")["metadata"].get("annotations") or {}
    assert names.RESERVATION_ANNOTATION not in annotations
