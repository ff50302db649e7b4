"""fluence_flux.adopt: a bounded queue served by one worker, pruned by deadline."""

from __future__ import annotations

from fluence_core.api import CONFIGMAPS, JOBS
from fluence_core.testing import FakeCluster
from fluence_flux.adopt import Adopter, Adoption


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.01)


def made(cluster: FakeCluster, name: str) -> Adoption:
    cluster.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
        },
        "default",
    )
    return Adoption(cluster, JOBS, name, "default", [(CONFIGMAPS, name)], timeout=60)


def test_a_hundred_waiting_adoptions_share_one_worker_and_are_pruned_at_their_deadline() -> None:
    cluster, clock, workers = FakeCluster(), Clock(), []
    adopter = Adopter(spawn=workers.append, clock=clock, sleep=clock.sleep)
    for i in range(100):
        assert adopter.submit(made(cluster, f"j{i}"))
    assert len(workers) == 1, "one worker for the queue, not a thread per adoption"
    workers[0]()
    assert adopter.waiting == 0
    assert cluster.list(CONFIGMAPS, "default").items == [], "owners never came: objects deleted"
    assert clock.now <= 61


def test_lookups_back_off_instead_of_polling_every_fifth_of_a_second() -> None:
    cluster, clock, workers = FakeCluster(), Clock(), []
    looked = []
    get = cluster.get

    def counting_get(resource, name, namespace=None):  # type: ignore[no-untyped-def]
        if resource is JOBS:
            looked.append(clock.now)
        return get(resource, name, namespace)

    cluster.get = counting_get  # type: ignore[method-assign]
    adopter = Adopter(spawn=workers.append, clock=clock, sleep=clock.sleep)
    adopter.submit(made(cluster, "slow"))
    workers[0]()
    assert len(looked) < 25, f"{len(looked)} lookups in 60 s (0.2 s polling would be 300)"


def test_a_full_queue_refuses_at_once_and_deletes_what_was_made() -> None:
    cluster, clock, workers = FakeCluster(), Clock(), []
    adopter = Adopter(spawn=workers.append, clock=clock, sleep=clock.sleep, capacity=2)
    assert adopter.submit(made(cluster, "a")) and adopter.submit(made(cluster, "b"))
    assert adopter.full
    assert adopter.submit(made(cluster, "c")) is False
    assert cluster.get(CONFIGMAPS, "c", "default") is None


def test_an_owner_stored_while_waiting_adopts_its_objects() -> None:
    cluster, clock, workers = FakeCluster(), Clock(), []
    adopter = Adopter(spawn=workers.append, clock=clock, sleep=clock.sleep)
    adopter.submit(made(cluster, "lmp"))
    cluster.create(
        JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "lmp", "namespace": "default"},
            "spec": {},
        },
        "default",
    )
    workers[0]()
    owners = cluster.get(CONFIGMAPS, "lmp", "default")["metadata"]["ownerReferences"]
    assert owners[0]["kind"] == "Job" and owners[0]["name"] == "lmp"
