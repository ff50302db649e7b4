"""Leader election on a Lease, over the in-memory cluster and a virtual clock."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import status_error
from fluence_core.scheduler.leader import LeaderElector, LeaseUnavailable
from fluence_core.testing import ManualClock

EPOCH = 1_800_000_000.0  # a wall-clock time, as a Lease's renewTime carries one


def _rivals(**first_options: Any) -> tuple[FakeCluster, ManualClock, LeaderElector, LeaderElector]:
    """Candidates ``a`` (with ``first_options``) and ``b`` for Lease ``default/fluence`` on one
    in-memory cluster and one virtual clock."""
    cluster, clock = FakeCluster(), ManualClock(EPOCH)
    first = LeaderElector(cluster, "fluence", "default", "a", clock=clock, **first_options)
    second = LeaderElector(cluster, "fluence", "default", "b", clock=clock)
    return cluster, clock, first, second


def test_only_one_candidate_leads_while_the_lease_is_fresh() -> None:
    _, clock, first, second = _rivals()
    assert first.try_acquire()
    assert not second.try_acquire()
    clock.now += 5
    assert first.try_acquire(), "the holder renews"
    clock.now += 10
    assert not second.try_acquire(), "renewed 10 s ago, 15 s lease: still held"


def test_an_expired_lease_is_taken_over_and_counted() -> None:
    cluster, clock, first, second = _rivals()
    assert first.try_acquire()
    clock.now += 16
    assert second.try_acquire()
    lease = cluster.get("leases", "fluence", "default")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    assert not first.try_acquire()


def test_a_stale_update_loses_the_race() -> None:
    cluster, clock = FakeCluster(), ManualClock(EPOCH)
    first = LeaderElector(cluster, "fluence", "default", "a", clock=clock)
    assert first.try_acquire()
    stale = cluster.get("leases", "fluence", "default")
    clock.now += 20
    assert LeaderElector(cluster, "fluence", "default", "b", clock=clock).try_acquire()
    stale["spec"]["holderIdentity"] = "c"
    from fluence_core.kube.errors import Conflict

    try:
        cluster.replace("leases", stale, "default")
    except Conflict:
        pass
    else:
        raise AssertionError("a replace with a stale resourceVersion must conflict")


class Refusing(FakeCluster):
    """A cluster whose Lease writes (or all Lease requests) fail with one HTTP status."""

    def __init__(self, status: int, message: str, *, reads_too: bool = False) -> None:
        self.status, self.message, self.reads_too = status, message, reads_too
        self.armed = False
        super().__init__()  # creates the default namespaces
        self.armed = True

    def _refuse(self) -> None:
        if self.armed:
            raise status_error(self.status, {"code": self.status, "message": self.message})

    def get(self, *args: Any, **kwargs: Any) -> Any:
        if self.reads_too:
            self._refuse()
        return super().get(*args, **kwargs)

    def create(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()
        return super().create(*args, **kwargs)


def test_a_missing_namespace_is_one_clear_error_not_an_endless_wait() -> None:
    elector = LeaderElector(Refusing(404, 'namespaces "fluence-system" not found'),
                            "fluence", "fluence-system", "a", clock=ManualClock(EPOCH))
    with pytest.raises(LeaseUnavailable, match="namespace fluence-system does not exist"):
        elector.run(lambda stop: None, threading.Event())


def test_forbidden_lease_access_names_the_rights_it_needs() -> None:
    elector = LeaderElector(Refusing(403, "leases is forbidden", reads_too=True),
                            "fluence", "kube-system", "a", clock=ManualClock(EPOCH))
    with pytest.raises(LeaseUnavailable, match="grant get, create and update on "
                                               "coordination.k8s.io leases in kube-system"):
        elector.try_acquire()


def test_other_api_errors_are_retried() -> None:
    elector = LeaderElector(Refusing(500, "etcd timeout"), "fluence", "default", "a",
                            clock=ManualClock(EPOCH))
    assert elector.try_acquire() is False


def _lead_until(stop_leading: threading.Event) -> None:
    stop_leading.wait()


def test_a_leader_that_is_stopped_releases_its_lease_and_the_next_takes_it_at_once() -> None:
    cluster, _, first, second = _rivals(renew=0.01)
    stop = threading.Event()
    runner = threading.Thread(target=first.run, args=(_lead_until, stop))
    runner.start()
    while (cluster.get("leases", "fluence", "default") or {}).get("spec", {}).get(
            "holderIdentity") != "a":
        stop.wait(0.01)
    assert not second.try_acquire(), "held and fresh"
    stop.set()  # SIGTERM in fluence up
    runner.join(timeout=10)
    assert not runner.is_alive()
    lease = cluster.get("leases", "fluence", "default")
    assert lease["spec"].get("holderIdentity") is None
    assert lease["spec"]["leaseDurationSeconds"] == 1
    assert second.try_acquire(), "taken at once, the virtual clock never moved"
    assert cluster.get("leases", "fluence", "default")["spec"]["leaseTransitions"] == 1


def test_releasing_a_lease_someone_else_took_leaves_it_theirs() -> None:
    cluster, clock, first, second = _rivals()
    assert first.try_acquire()
    clock.now += 16
    assert second.try_acquire()
    assert first.release() is False
    lease = cluster.get("leases", "fluence", "default")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseDurationSeconds"] == 15


def test_a_loop_that_does_not_stop_keeps_the_lease_until_it_expires() -> None:
    cluster, clock = FakeCluster(), ManualClock(EPOCH)
    elector = LeaderElector(cluster, "fluence", "default", "a", clock=clock, renew=0.01)
    elector.join_timeout = 0.05
    never = threading.Event()
    leading = threading.Event()
    stop = threading.Event()

    def stuck(stop_leading: threading.Event) -> None:
        leading.set()
        never.wait(5)  # ignores stop_leading, as a loop stuck in a bind would

    runner = threading.Thread(target=elector.run, args=(stuck, stop))
    runner.start()
    # Stop once the loop runs, not once the Lease is written: a stop between the two is
    # the "stopped the moment it won" case, which hands the Lease on (the next test).
    assert leading.wait(10)
    assert cluster.get("leases", "fluence", "default")["spec"]["holderIdentity"] == "a"
    stop.set()
    runner.join(timeout=10)
    never.set()
    assert cluster.get("leases", "fluence", "default")["spec"]["holderIdentity"] == "a"


def test_a_leader_stopped_the_moment_it_wins_the_lease_still_hands_it_on() -> None:
    cluster, _, first, second = _rivals()
    stop = threading.Event()
    acquire = first.try_acquire

    def acquire_then_stop() -> bool:
        won = acquire()
        stop.set()  # SIGTERM in fluence up, right as the Lease is won
        return won

    first.try_acquire = acquire_then_stop  # type: ignore[method-assign]
    first.run(_lead_until, stop)
    lease = cluster.get("leases", "fluence", "default")
    assert lease["spec"].get("holderIdentity") is None
    assert second.try_acquire(), "taken at once, not 15 s later"
