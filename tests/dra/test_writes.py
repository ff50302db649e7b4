"""A claim's allocation written as kube-scheduler writes it, and taken back."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fluence_core import names
from fluence_core.dra.claims import read_claim
from fluence_core.dra.plan import ClaimWrite
from fluence_core.dra.writes import undo, write, write_all
from fluence_core.kube.api import RESOURCE_CLAIMS
from fluence_core.kube.errors import Conflict
from fluence_core.kube.fake import FakeCluster
from fluence_core.testing import make_device_request, make_resource_claim_dict

ALLOCATION = {"devices": {"results": [
    {"request": "r", "driver": "gpu.example.com", "pool": "n1", "device": "gpu0"}]}}
POD = {"resource": "pods", "name": "p", "uid": "u1"}


def _stored(cluster: FakeCluster) -> dict[str, object]:
    found = cluster.get(RESOURCE_CLAIMS, "c", "default")
    assert found is not None
    return found


def _change(cluster: FakeCluster) -> ClaimWrite:
    return ClaimWrite(read_claim(_stored(cluster)), ALLOCATION, (POD,))


@pytest.fixture
def cluster() -> FakeCluster:
    found = FakeCluster()
    found.create(RESOURCE_CLAIMS, make_resource_claim_dict("c", [make_device_request("r", "g")]))
    return found


def test_a_new_allocation_gets_the_finalizer_the_allocation_and_the_pod(
        cluster: FakeCluster) -> None:
    write(cluster, _change(cluster))
    stored = _stored(cluster)
    assert stored["metadata"]["finalizers"] == [names.CLAIM_PROTECTION_FINALIZER]  # type: ignore[index]
    assert stored["status"] == {"allocation": ALLOCATION, "reservedFor": [POD]}


def test_a_claim_changed_since_it_was_read_is_a_conflict(cluster: FakeCluster) -> None:
    change = _change(cluster)
    cluster.patch_status(RESOURCE_CLAIMS, "c", {"status": {"allocation": ALLOCATION}}, "default")
    with pytest.raises(Conflict, match="got allocated elsewhere in the meantime"):
        write(cluster, change)


def test_undo_clears_the_allocation_and_the_finalizer(cluster: FakeCluster) -> None:
    change = _change(cluster)
    write(cluster, change)
    undo(cluster, [change], kept=())
    stored = _stored(cluster)
    assert not stored.get("status") and not stored["metadata"].get("finalizers")  # type: ignore[union-attr]


def test_undo_keeps_the_claims_of_pods_that_bound(cluster: FakeCluster) -> None:
    change = _change(cluster)
    write(cluster, change)
    undo(cluster, [change], kept={"p"})
    assert _stored(cluster)["status"] == {"allocation": ALLOCATION, "reservedFor": [POD]}


def _claims(cluster: FakeCluster, count: int) -> list[ClaimWrite]:
    changes = []
    for i in range(count):
        cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
            f"c{i}", [make_device_request("r", "g")]))
        stored = cluster.get(RESOURCE_CLAIMS, f"c{i}", "default")
        assert stored is not None
        device = {**ALLOCATION["devices"]["results"][0], "device": f"gpu{i}"}
        changes.append(ClaimWrite(read_claim(stored), {"devices": {"results": [device]}},
                                  ({"resource": "pods", "name": f"p{i}", "uid": f"u{i}"},)))
    return changes


def test_a_pool_writes_the_claims_side_by_side(cluster: FakeCluster) -> None:
    changes = _claims(cluster, 6)
    started = threading.Barrier(6, timeout=5)
    real = cluster.patch_status

    def meeting(*args: Any, **kwargs: Any) -> Any:
        started.wait()  # every write is in flight at once, or this times out
        return real(*args, **kwargs)
    cluster.patch_status = meeting  # type: ignore[method-assign]
    with ThreadPoolExecutor(6) as pool:
        write_all(cluster, changes, pool)
    for i in range(6):
        stored = cluster.get(RESOURCE_CLAIMS, f"c{i}", "default")
        assert stored is not None and stored["status"]["reservedFor"][0]["name"] == f"p{i}"


def test_one_write_failing_on_the_pool_takes_back_the_others(cluster: FakeCluster) -> None:
    changes = _claims(cluster, 4)
    cluster.patch_status(RESOURCE_CLAIMS, "c2", {"status": {"allocation": ALLOCATION}},
                         "default")  # c2 changed since it was read: its write conflicts
    with ThreadPoolExecutor(4) as pool, pytest.raises(Conflict):
        write_all(cluster, changes, pool)
    for i in (0, 1, 3):
        stored = cluster.get(RESOURCE_CLAIMS, f"c{i}", "default")
        assert stored is not None and not (stored.get("status") or {}).get("allocation")


def test_a_claim_touched_since_it_was_read_is_written_again_with_its_new_version(
        cluster: FakeCluster) -> None:
    change = _change(cluster)
    other = {"resource": "pods", "name": "q", "uid": "u2"}
    cluster.patch(RESOURCE_CLAIMS, "c", {"metadata": {"labels": {"touched": "yes"}}}, "default")
    cluster.patch_status(RESOURCE_CLAIMS, "c", {"status": {"reservedFor": [other]}}, "default")
    write(cluster, change)
    stored = _stored(cluster)
    assert stored["status"] == {"allocation": ALLOCATION, "reservedFor": [other, POD]}
    assert stored["metadata"]["labels"] == {"touched": "yes"}  # type: ignore[index]


def test_a_claim_whose_allocation_went_meanwhile_is_not_reserved(cluster: FakeCluster) -> None:
    cluster.patch_status(RESOURCE_CLAIMS, "c", {"status": {"allocation": ALLOCATION}}, "default")
    reserve_only = ClaimWrite(read_claim(_stored(cluster)), None, (POD,))
    cluster.patch_status(RESOURCE_CLAIMS, "c", {"status": {"allocation": None}}, "default")
    with pytest.raises(Conflict, match="had its allocation changed in the meantime"):
        write(cluster, reserve_only)
    assert not _stored(cluster)["status"].get("reservedFor")  # type: ignore[attr-defined]


def test_a_claim_being_deleted_is_not_written(cluster: FakeCluster) -> None:
    change = _change(cluster)
    cluster.patch(RESOURCE_CLAIMS, "c", {"metadata": {
        "deletionTimestamp": "2026-12-02T00:00:00Z"}}, "default")
    with pytest.raises(Conflict, match="got deleted in the meantime"):
        write(cluster, change)


def test_a_pod_already_reserved_is_not_added_twice(cluster: FakeCluster) -> None:
    change = _change(cluster)
    cluster.patch_status(RESOURCE_CLAIMS, "c", {"status": {"reservedFor": [POD]}}, "default")
    write(cluster, change)
    assert _stored(cluster)["status"]["reservedFor"] == [POD]  # type: ignore[index]
