"""Leader election on a Lease, over the in-memory cluster and a virtual clock."""

from __future__ import annotations

from fluence_core.fake_cluster import FakeCluster
from fluence_core.scheduler.leader import LeaderElector


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_only_one_candidate_leads_while_the_lease_is_fresh() -> None:
    cluster, clock = FakeCluster(), Clock()
    first = LeaderElector(cluster, "fluence", "default", "a", clock=clock)
    second = LeaderElector(cluster, "fluence", "default", "b", clock=clock)
    assert first.try_acquire()
    assert not second.try_acquire()
    clock.now += 5
    assert first.try_acquire(), "the holder renews"
    clock.now += 10
    assert not second.try_acquire(), "renewed 10 s ago, 15 s lease: still held"


def test_an_expired_lease_is_taken_over_and_counted() -> None:
    cluster, clock = FakeCluster(), Clock()
    first = LeaderElector(cluster, "fluence", "default", "a", clock=clock)
    second = LeaderElector(cluster, "fluence", "default", "b", clock=clock)
    assert first.try_acquire()
    clock.now += 16
    assert second.try_acquire()
    lease = cluster.get("leases", "fluence", "default")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    assert not first.try_acquire()


def test_a_stale_update_loses_the_race() -> None:
    cluster, clock = FakeCluster(), Clock()
    first = LeaderElector(cluster, "fluence", "default", "a", clock=clock)
    assert first.try_acquire()
    stale = cluster.get("leases", "fluence", "default")
    clock.now += 20
    assert LeaderElector(cluster, "fluence", "default", "b", clock=clock).try_acquire()
    stale["spec"]["holderIdentity"] = "c"
    from fluence_core.kube_errors import Conflict

    try:
        cluster.replace("leases", stale, "default")
    except Conflict:
        pass
    else:
        raise AssertionError("a replace with a stale resourceVersion must conflict")
