"""The orphan sweep: gated workers whose scout ended or went away are released as scout-lost."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import Settings
from fluence_core.hybrid.orphans import REASON, OrphanSweep, orphaned

from .scouts import GATE, JOB, gates, job_qj, split_member, stored


@pytest.fixture
def cluster() -> FakeCluster:
    fake = job_qj()
    fake.create("pods", split_member("other-0", names.ROLE_SCOUT, sidecar=True, group="other",
                                     owners=[{**JOB[0], "uid": "other-job"}]))
    fake.create("pods", split_member("other-1", names.ROLE_WORKER, gated=True, group="other",
                                     owners=[{**JOB[0], "uid": "other-job"}]))
    return fake


def phase(cluster: FakeCluster, name: str, value: str) -> None:
    cluster.patch_status("pods", name, {"status": {"phase": value}}, "default")


def sweep_twice(sweep: OrphanSweep) -> list[str]:
    """A group is released on the second sweep that finds it orphaned."""
    assert sweep.sweep() == []
    return sweep.sweep()


def writes(cluster: FakeCluster) -> str:
    return cluster.resource_version


def test_a_failed_scout_s_workers_are_released_as_scout_lost(cluster, caplog) -> None:
    phase(cluster, "qj-0", "Failed")
    with caplog.at_level(logging.WARNING, logger="fluence"):
        released = sweep_twice(OrphanSweep(cluster, Settings()))
    assert sorted(released) == ["qj-1", "qj-2"]
    for name in ("qj-1", "qj-2"):
        assert gates(cluster, name) == ["example.org/other"]  # only Fluence's gate goes
        stamped = stored(cluster, name)["metadata"]["annotations"]
        assert stamped[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_LOST
        assert stamped[names.BACKEND_ANNOTATION] == "sim_qpu"  # the ended scout's backend
    assert gates(cluster, "other-1") == ["example.org/other", GATE]  # its scout runs
    assert "default/qj" in caplog.text and "qj-0 (Failed)" in caplog.text
    events = cluster.events(reason=REASON)
    assert sorted(e["involvedObject"]["name"] for e in events) == ["qj-1", "qj-2"]
    assert all(e["type"] == "Warning" for e in events)


def test_a_deleted_scout_s_workers_are_released(cluster) -> None:
    cluster.delete("pods", "qj-0", "default")
    sweep = OrphanSweep(cluster, Settings())
    assert sorted(sweep_twice(sweep)) == ["qj-1", "qj-2"]
    stamped = stored(cluster, "qj-1")["metadata"]["annotations"]
    assert stamped[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_LOST
    assert names.BACKEND_ANNOTATION not in stamped  # nothing left to copy it from


def test_a_scout_being_deleted_counts_as_gone(cluster) -> None:
    scout = stored(cluster, "qj-0")  # as a list shows a pod in its grace period
    scout["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    found = orphaned([scout, stored(cluster, "qj-1"), stored(cluster, "qj-2")], GATE)
    assert [len(group.workers) for group in found.values()] == [2]
    scout["metadata"].pop("deletionTimestamp")
    assert orphaned([scout, stored(cluster, "qj-1")], GATE) == {}


def test_a_running_scout_s_workers_are_untouched(cluster) -> None:
    phase(cluster, "qj-0", "Running")
    before = writes(cluster)
    sweep = OrphanSweep(cluster, Settings())
    assert sweep_twice(sweep) == []
    assert sweep.sweep() == []
    assert writes(cluster) == before
    assert gates(cluster, "qj-1") == ["example.org/other", GATE]


def test_a_replacement_scout_on_the_second_sweep_takes_the_group_back(cluster) -> None:
    phase(cluster, "qj-0", "Failed")
    sweep = OrphanSweep(cluster, Settings())
    assert sweep.sweep() == []  # suspected
    cluster.create("pods", split_member("qj-0-again", names.ROLE_SCOUT, sidecar=True))
    assert sweep.sweep() == []
    assert gates(cluster, "qj-1") == ["example.org/other", GATE]


def test_workers_already_released_get_no_write(cluster) -> None:
    cluster.patch("pods", "qj-0", {"metadata": {"annotations": {
        names.SCOUT_STATUS_ANNOTATION: names.SCOUT_STATUS_READY}}}, "default")
    for name in ("qj-1", "qj-2"):
        cluster.patch("pods", name, {"spec": {"schedulingGates": [
            {"name": "example.org/other"}]}}, "default")
    phase(cluster, "qj-0", "Succeeded")
    before = writes(cluster)
    sweep = OrphanSweep(cluster, Settings())
    assert sweep_twice(sweep) == []
    assert writes(cluster) == before
    assert cluster.events(reason=REASON) == []


def test_a_late_worker_of_a_scout_that_reported_gets_its_release(cluster) -> None:
    cluster.patch("pods", "qj-0", {"metadata": {"annotations": {
        names.SCOUT_STATUS_ANNOTATION: names.SCOUT_STATUS_READY,
        names.SCOUT_JOB_ID_ANNOTATION: "task-1"}}}, "default")
    phase(cluster, "qj-0", "Succeeded")
    assert sorted(sweep_twice(OrphanSweep(cluster, Settings()))) == ["qj-1", "qj-2"]
    stamped = stored(cluster, "qj-1")["metadata"]["annotations"]
    assert stamped[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_READY
    assert stamped[names.SCOUT_JOB_ID_ANNOTATION] == "task-1"
    assert cluster.events(reason=REASON) == []


def test_one_list_per_sweep_and_one_of_the_jobs_pods_before_a_release(cluster,
                                                                       monkeypatch) -> None:
    phase(cluster, "qj-0", "Failed")
    calls: list[Any] = []
    real = cluster.list
    monkeypatch.setattr(cluster, "list", lambda *a, **k: calls.append(a) or real(*a, **k))
    sweep = OrphanSweep(cluster, Settings())
    sweep_twice(sweep)
    assert len(calls) == 3  # two sweeps, and the orphaned group's Job: no sidecar alive


def test_the_loop_sweeps_until_stopped(cluster) -> None:
    phase(cluster, "qj-0", "Failed")
    sweep = OrphanSweep(cluster, Settings(orphan_sweep=0.05))
    done = threading.Event()
    real = sweep.sweep

    def counted() -> list[str]:
        released = real()
        if released:
            done.set()
        return released

    sweep.sweep = counted  # type: ignore[method-assign]
    sweep.start()
    try:
        assert done.wait(5)
    finally:
        sweep.stop()
    assert gates(cluster, "qj-1") == ["example.org/other"]


def test_zero_interval_is_off(cluster) -> None:
    sweep = OrphanSweep(cluster, Settings(orphan_sweep=0))
    sweep.start()
    assert sweep._thread is None
    sweep.stop()


def test_a_lost_scout_holding_its_qpu_by_claim_passes_on_that_backend(cluster) -> None:
    """A scout that asked by claim carries no backend annotations; its workers get what
    its claim still holds, read off the QPU driver's device."""
    scout = stored(cluster, "qj-0")
    cluster.delete("pods", "qj-0", "default")
    for key in ("uid", "resourceVersion", "creationTimestamp"):
        scout["metadata"].pop(key, None)
    scout["metadata"]["annotations"] = {
        k: v for k, v in scout["metadata"]["annotations"].items()
        if k != names.BACKEND_ANNOTATION and not k.startswith(names.ATTR_ANNOTATION_PREFIX)}
    scout["spec"]["resourceClaims"] = [{"name": "qpu", "resourceClaimName": "qj-qpu"}]
    cluster.create("pods", scout, "default")
    cluster.create(RESOURCE_SLICES, {"metadata": {"name": "qpus", "labels": {
        names.MANAGED_BY_LABEL: names.QPU_DRIVER_MANAGER}}, "spec": {
        "driver": names.QPU_DRA_DRIVER, "allNodes": True,
        "pool": {"name": "cluster", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "east0", "attributes": {
            "backend": {"string": "east"},
            f"{names.RESOURCE_DOMAIN}/region": {"string": "us-east-1"}}}]}})
    cluster.create(RESOURCE_CLAIMS, {"metadata": {"name": "qj-qpu"}, "spec": {}}, "default")
    cluster.patch_status(RESOURCE_CLAIMS, "qj-qpu", {"status": {"allocation": {"devices": {
        "results": [{"request": "qpu", "driver": names.QPU_DRA_DRIVER, "pool": "cluster",
                     "device": "east0"}]}}}}, "default")
    phase(cluster, "qj-0", "Failed")
    assert sorted(sweep_twice(OrphanSweep(cluster, Settings()))) == ["qj-1", "qj-2"]
    stamped = stored(cluster, "qj-1")["metadata"]["annotations"]
    assert stamped[names.BACKEND_ANNOTATION] == "east"
    assert stamped[names.attr_annotation("region")] == "us-east-1"
