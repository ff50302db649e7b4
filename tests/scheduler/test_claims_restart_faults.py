"""A scheduler killed at any write while allocating claims, then restarted: nothing is
allocated twice, every pod runs where its devices are, and no gang is split."""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core.kube.api import (
    DEVICE_CLASSES, NODES, PODGROUPS, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES,
)
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request,
    make_resource_claim_dict, make_resource_slice_dict,
)
from tests.scheduler.conftest import node, pod, pod_group
from tests.scheduler.faults import Faulty, Killed, quiesce

pytestmark = pytest.mark.usefixtures("clean_env")

DRIVER = "gpu.example.com"
MEMBERS = {"g": 3, "solo": 1}
"""A gang of three pods and a lone pod, each pod with a claim of two devices, on three
nodes of two devices and one of four."""


def populated() -> FakeCluster:
    cluster = FakeCluster()
    cluster.create(DEVICE_CLASSES, make_device_class_dict("gpu", f'device.driver == "{DRIVER}"'))
    for i, devices in enumerate((2, 2, 2, 4)):
        cluster.create(NODES, node(f"n{i}", cpu=4))
        cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
            f"n{i}-gpus", DRIVER, [make_device(f"gpu{d}") for d in range(devices)], node=f"n{i}"))
    cluster.create(PODGROUPS, pod_group("g", MEMBERS["g"]), "default")
    for group, size in MEMBERS.items():
        for i in range(size):
            name = f"{group}-{i}"
            cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
                name, [make_device_request("r", "gpu", 2)]))
            cluster.create(PODS, pod(name, group=group if group == "g" else None,
                                     resourceClaims=claim_entries(gpu=name)), "default")
    return cluster


def scheduler_on(cluster: Any) -> Scheduler:
    return Scheduler(cluster, load_settings(pod_initial_backoff_seconds=0))


def first_run_writes() -> list[str]:
    faulty = Faulty(populated())
    scheduler = scheduler_on(faulty)
    scheduler.start()
    quiesce(scheduler)
    return faulty.writes


WRITES = first_run_writes()


def _claims(cluster: FakeCluster) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c.get("status") or {}
            for c in cluster.list(RESOURCE_CLAIMS).items}


def test_the_uninterrupted_run_allocates_every_claim_and_binds_every_pod() -> None:
    assert sum(w.startswith("bind") for w in WRITES) == 4
    assert sum(w.startswith("patch_status resourceclaims/") for w in WRITES) == 4


@pytest.mark.parametrize(
    "kill_at", range(1, len(WRITES) + 2),
    ids=[f"before-{i + 1}-{w}" for i, w in enumerate(WRITES)] + ["after-the-last-write"],
)
def test_a_kill_at_any_write_then_a_restart_allocates_nothing_twice(kill_at: int) -> None:
    cluster = populated()
    first = scheduler_on(Faulty(cluster, kill_at))
    try:
        first.start()
        quiesce(first)
    except Killed:
        pass
    restarted = scheduler_on(cluster)
    restarted.start()
    quiesce(restarted)
    pods = {p["metadata"]["name"]: p for p in cluster.list(PODS).items}
    claims = _claims(cluster)
    taken = [(r["pool"], r["device"]) for status in claims.values()
             for r in (status.get("allocation") or {}).get("devices", {}).get("results", [])]
    assert len(taken) == len(set(taken)) == 8, claims
    gang = [pods[f"g-{i}"]["spec"].get("nodeName") for i in range(MEMBERS["g"])]
    assert all(gang), f"the gang is not whole: {gang}"
    for name, found in pods.items():
        where = found["spec"].get("nodeName")
        status = claims[name]
        assert where is not None, f"{name} is not bound"
        assert {r["pool"] for r in status["allocation"]["devices"]["results"]} == {where}
        assert [r["name"] for r in status["reservedFor"]] == [name]
