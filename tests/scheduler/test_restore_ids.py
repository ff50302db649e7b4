"""Job ids cannot collide on a restart: records, pool leases and shared allocations (issue 27).

The reported failure: a lone pod of ``100m`` holding the only qpu records jobs 1
(the qpu, numbered by the inner matcher) and ``1 << 40`` (its millicores, numbered by
the pool). A restarted scheduler restored the millicores first; the pool leased a core
for them from the fresh inner matcher, which numbered that lease 1; the qpu's job 1
then failed with "job 1 is already held", and the running pod was deleted.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any, Callable

import pytest

from fluence_core import names
from fluence_core.kube.api import PODS
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Allocation, NodeShare
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.pooled import SHARED_JOBIDS, pooled
from fluence_core.models import NodeInfo
from fluence_core.plugins import get_plugin_manager
from fluence_core.resource_config import parse_resource_config
from fluence_core.scheduler.restart.fallback import HELD_FROM_POD
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.settings import load_settings
from tests.scheduler.conftest import Harness, node, pod, pod_group
from tests.scheduler.parts import ONE_QPU, WANTS_QPU, cluster_of

pytestmark = pytest.mark.usefixtures("clean_env")


Factory = Callable[..., Harness]


def test_a_millicore_pod_holding_the_only_qpu_survives_a_restart_and_keeps_it(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), node("n1"), pod("holder", "100m", requests=WANTS_QPU),
                        resources=ONE_QPU)
    h.cycle()
    assert h.node_of("holder") == "n0"
    recorded = h.cluster.get(PODS, "holder", "default")["metadata"]["annotations"]
    assert recorded[names.JOBIDS_ANNOTATION] == f"1,{SHARED_JOBIDS}", "the reported job ids"
    h.restart()
    h.cycle()
    assert h.node_of("holder") == "n0", "the running pod is neither deleted nor moved"
    h.add(pod("second", "100m", requests=WANTS_QPU))
    h.cycle()
    assert h.node_of("second") is None, "the only qpu is held by the holder"
    h.finish("holder")
    h.cycle()
    assert h.node_of("second") is not None, "bound once the holder ended"


def test_after_a_restart_every_shape_beside_the_qpu_holder_keeps_running(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), node("n1"), pod("holder", "100m", requests=WANTS_QPU),
                        resources=ONE_QPU)
    h.cycle()
    h.add(pod("two", "2"), pod("milli", "300m"), pod("mem", "0", requests={"memory": "6Gi"}),
          pod_group("gm", 2), pod("gm-0", "200m", group="gm"), pod("gm-1", "200m", group="gm"))
    h.cycle()
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in h.cluster.list(PODS).items}
    assert all(before.values()), before
    h.restart()
    h.cycle()
    after = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in h.cluster.list(PODS).items}
    assert after == before
    assert not h.cluster.events(reason="GangReleased")


FLUXION_LIB = os.environ.get("FLUENCE_FLUXION_LIB")
"""Read before ``clean_env`` empties the environment: the Fluxion cases set it again."""
MATCHERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("fluxion", id="fluxion", marks=pytest.mark.skipif(
        not FLUXION_LIB, reason="FLUENCE_FLUXION_LIB is not set (flux-sched's libreapi_cli)")),
]


def _pooled(matcher: str = "embedded") -> Any:
    """A fresh pool over a fresh ``matcher`` (as a restarted scheduler has them)."""
    graph = ResourceGraph([NodeInfo.from_kube(node("n0", cpu=4))],
                          parse_resource_config(ONE_QPU, "test.yaml"))
    if matcher == "embedded":
        return pooled(EmbeddedMatcher(graph), graph)
    settings = load_settings()  # the test set FLUENCE_FLUXION_LIB again
    inner = get_plugin_manager(settings).hook.fluence_matcher(settings=settings, graph=graph)
    assert inner is not None and inner.name == "fluxion", inner
    return pooled(inner, graph)


def _held_by_first_scheduler(matcher: str = "embedded") -> list[tuple[str, dict[str, Any]]]:
    """Three owners as one scheduler recorded them: a whole-core gang (job 2), a qpu
    holder of 100m (jobs 1 and a shared one), and a millicore gang (shared)."""
    first = _pooled(matcher)
    qpu = first.match_allocate(_virtual())
    whole = first.match_allocate(_compute(cores=2))
    milli = first.match_allocate(_compute(millicores=100))
    gang = first.match_allocate(_compute(millicores=700))
    assert qpu and whole and milli and gang
    assert (qpu.jobid, whole.jobid) == (1, 2) and milli.jobid >= SHARED_JOBIDS
    owners = [
        ("podgroups", _owner(pod_group("whole", 1), ["w-0"], {"compute": whole})),
        ("pods", _owner(pod("holder", "100m"), ["holder"], {"compute": milli, "qpu": qpu})),
        ("podgroups", _owner(pod_group("milli", 1), ["m-0"], {"compute": gang})),
    ]
    return owners


def _owner(obj: dict[str, Any], pods: list[str],
           allocations: dict[str, Allocation]) -> dict[str, Any]:
    record = HeldPlacement("pods", "default", "x", pods, allocations).to_record()
    obj["metadata"].setdefault("annotations", {})[names.ALLOCATION_ANNOTATION] = \
        json.dumps([record])
    return obj


def _compute(cores: int = 0, millicores: int = 0) -> dict[str, Any]:
    inner = [{"type": "millicores", "count": millicores}] if millicores else \
        [{"type": "core", "count": cores}]
    return {"version": 1, "resources": [{"type": "slot", "count": 1, "label": "task",
                                         "with": inner}],
            "tasks": [{"command": ["x"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0, "constraints": {
                "properties": [names.VIRTUAL_FALSE]}}}}


def _virtual() -> dict[str, Any]:
    return {"version": 1, "resources": [{"type": "slot", "count": 1, "label": "qpu",
                                         "with": [{"type": "node", "count": 1}]}],
            "tasks": [{"command": ["x"], "slot": "qpu", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0, "constraints": {
                "properties": [names.VIRTUAL_TRUE, names.class_property("qpu")]}}}}


@pytest.mark.parametrize("matcher", MATCHERS)
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))),
                         ids=lambda order: "-".join(map(str, order)))
def test_records_restore_whole_whatever_order_their_owners_come_in(
    order: tuple[int, ...], matcher: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if FLUXION_LIB and matcher == "fluxion":
        monkeypatch.setenv("FLUENCE_FLUXION_LIB", FLUXION_LIB)
    owners = _held_by_first_scheduler(matcher)
    recorded = {a.jobid: a for _, obj in owners
                for entry in json.loads(obj["metadata"]["annotations"][
                    names.ALLOCATION_ANNOTATION])
                for a in map(Allocation.from_json, entry["allocations"].values())}
    restarted = _pooled(matcher)
    book = RecordBook(cluster_of(), read_only=True)
    book.restore([owners[i] for i in order], restarted, lambda namespace, name: True)
    assert not book.unrestored
    assert dict(restarted.allocations()) == recorded
    fresh = restarted.match_allocate(_compute(cores=1))
    assert fresh is not None and fresh.jobid not in recorded


def test_a_record_that_cannot_be_restored_gives_back_only_the_jobs_it_restored() -> None:
    owners = _held_by_first_scheduler()
    holder = owners[1][1]
    duplicate = pod("copy", "100m")
    duplicate["metadata"]["annotations"] = dict(holder["metadata"]["annotations"])
    matcher = _pooled()
    book = RecordBook(cluster_of(), read_only=True)
    book.restore([*owners, ("pods", duplicate)], matcher, lambda namespace, name: True)
    assert [owner for owner, _, _ in book.unrestored] == [("pods", "default", "copy")]
    held = {a.jobid for records in book.held.values() for r in records
            for a in r.allocations.values()}
    assert set(matcher.allocations()) == held, "the holder's jobs stay held"


def test_a_reload_re_holds_shared_allocations_and_whole_cores_with_their_own_ids(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod("holder", "100m", requests=WANTS_QPU),
                        pod("whole", "2"), resources=ONE_QPU)
    h.cycle()
    held = dict(h.scheduler.matcher.allocations())
    h.scheduler.reload_config(parse_resource_config(ONE_QPU, "again.yaml"))
    assert dict(h.scheduler.matcher.allocations()) == held


def test_a_kept_record_binds_a_millicore_member_where_the_record_holds_its_millicores(
    harness_factory: Factory,
) -> None:
    whole = Allocation(1, (NodeShare("n0", cores=(0,)),))
    shared = Allocation(SHARED_JOBIDS, (NodeShare("n1", pods=1, millicores=300),))
    group = _owner(pod_group("g", 2), ["g-0", "g-1"], {"compute": whole, "compute-1": shared})
    h = harness_factory(node("n0"), node("n1"), group,
                        pod("g-0", "1", group="g", node_name="n0"), pod("g-1", "300m", group="g"))
    assert h.node_of("g-1") == "n1", "bound at start, where its millicores are held"
    assert dict(h.scheduler.matcher.allocations()) == {1: whole, SHARED_JOBIDS: shared}


@pytest.mark.parametrize("shape, moved, into", [
    ("100m", "qpu", SHARED_JOBIDS * 2),
    ("1", "compute", SHARED_JOBIDS * 2),
    ("100m", "compute", 7),
], ids=["qpu-into-the-pools-ids", "whole-core-into-the-pools-ids", "millicores-into-inner-ids"])
def test_a_record_whose_job_id_is_in_the_wrong_space_is_held_from_its_pod_not_half_held(
    harness_factory: Factory, shape: str, moved: str, into: int,
) -> None:
    h = harness_factory(node("n0", cpu=1), pod("holder", shape, requests=WANTS_QPU),
                        resources=ONE_QPU)
    h.cycle()
    raw = h.cluster.get(PODS, "holder", "default")["metadata"]["annotations"]
    records = json.loads(raw[names.ALLOCATION_ANNOTATION])
    records[0]["allocations"][moved]["jobid"] = into  # an edited or corrupt record
    h.cluster.patch(PODS, "holder", {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: json.dumps(records)}}}, "default")
    h.restart()
    h.cycle()
    assert h.node_of("holder") == "n0", "the running pod is neither deleted nor moved"
    h.add(pod("second", "100m", requests=WANTS_QPU))
    h.add(pod("filler", "1"))
    h.cycle()
    assert h.node_of("second") is None, "the only qpu is the holder's"
    assert h.node_of("filler") is None, "the holder's CPU is held on its node"
    assert h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
