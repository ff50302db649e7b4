"""Groups of PodSets through the scheduling cycle: the gangs of one workload naming one
``podset-group-name`` share one domain of their required level, placed all or none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fluence_core import names
from fluence_core.kube.api import PODS
from tests.scheduler.conftest import Harness, node, pod, pod_group

LEVELS = f"topology:\n  levels: [{names.RACK_LABEL}]\n"
JOBSET = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js",
          "uid": "js-uid", "controller": True}


def _racks(*sizes: int) -> list[dict[str, Any]]:
    return [node(f"r{r}-{i}", labels={names.RACK_LABEL: f"r{r}"})
            for r, size in enumerate(sizes) for i in range(size)]


def _gang(name: str, size: int, *, group: str | None = "lw", level: str = names.RACK_LABEL,
          owner: dict[str, Any] | None = JOBSET, ready: int | None = None,
          ) -> list[dict[str, Any]]:
    """A gang of ``size`` pods of 4 cores (``ready`` of them made), owned as a JobSet's Job's
    PodGroup is, its pods naming ``group``."""
    annotations = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: level}
    if group is not None:
        annotations[names.KUEUE_PODSET_GROUP_ANNOTATION] = group
    made = pod_group(name, size)
    if owner is not None:
        made["metadata"]["ownerReferences"] = [dict(owner)]
    return [made, *(pod(f"{name}{i}", "4", group=name, annotations=annotations)
                    for i in range(size if ready is None else ready))]


def _rack(h: Harness, name: str) -> str | None:
    found = h.node_of(name)
    return None if found is None else str(found).split("-")[0]


def _reason(h: Harness, name: str) -> str:
    found = h.cluster.get(PODS, name, "default") or {}
    conditions = (found.get("status") or {}).get("conditions") or []
    return str(next((c["message"] for c in conditions if c["type"] == "PodScheduled"), ""))


def _leader_and_workers(harness_factory: Callable[..., Harness], *racks: int,
                        **options: Any) -> Harness:
    return harness_factory(*_racks(*racks), *_gang("leader", 1, **options),
                           *_gang("workers", 3, **options), resources=LEVELS)


def test_without_a_group_the_leader_takes_the_smallest_rack_apart_from_its_workers(
        harness_factory: Callable[..., Harness]) -> None:
    h = _leader_and_workers(harness_factory, 1, 4, group=None)
    h.cycle()
    assert _rack(h, "leader0") == "r0"
    assert {_rack(h, f"workers{i}") for i in range(3)} == {"r1"}


def test_a_leader_and_its_workers_in_one_group_share_one_rack(
        harness_factory: Callable[..., Harness]) -> None:
    h = _leader_and_workers(harness_factory, 1, 4)
    h.cycle()
    racks = {_rack(h, "leader0"), *(_rack(h, f"workers{i}") for i in range(3))}
    assert racks == {"r1"}, racks
    held = [share.node for a in h.scheduler.view.matcher.allocations().values()
            for share in a.nodes]
    assert sorted(held) == [f"r1-{i}" for i in range(4)], "the joint match was given back"


def test_the_group_takes_the_rack_that_fits_it_best(
        harness_factory: Callable[..., Harness]) -> None:
    h = _leader_and_workers(harness_factory, 1, 6, 4)
    h.cycle()
    assert {_rack(h, "leader0"), *(_rack(h, f"workers{i}") for i in range(3))} == {"r2"}


def test_a_group_no_rack_can_hold_places_none_of_its_gangs(
        harness_factory: Callable[..., Harness]) -> None:
    h = _leader_and_workers(harness_factory, 2, 3)
    h.cycle()
    assert [h.node_of(p) for p in ("leader0", "workers0", "workers1", "workers2")] == [None] * 4
    assert not h.scheduler.view.matcher.allocations()
    assert "group of PodSets lw of default/JobSet/js" in _reason(h, "leader0")
    assert "group of PodSets lw" in _reason(h, "workers0")


def test_a_gang_waits_for_the_other_gang_of_its_group_to_be_ready(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(*_racks(1, 4), *_gang("leader", 1), *_gang("workers", 3, ready=2),
                        resources=LEVELS)
    h.cycle()
    h.cycle()  # a group still arriving is told after a quiet while
    assert h.node_of("leader0") is None
    assert "waits for gang default/workers of its group of PodSets" in _reason(h, "leader0")


def test_gangs_of_one_group_stating_different_levels_wait_saying_so(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(*_racks(1, 4), *_gang("leader", 1),
                        *_gang("workers", 3, level=names.ZONE_LABEL),
                        resources=f"topology:\n  levels: [{names.ZONE_LABEL}, "
                                  f"{names.RACK_LABEL}]\n")
    h.cycle()
    assert [h.node_of(p) for p in ("leader0", "workers0")] == [None, None]
    why = _reason(h, "workers0")
    assert "must state the same topology" in why
    assert f"required {names.RACK_LABEL}" in why and f"required {names.ZONE_LABEL}" in why


def test_the_same_group_name_in_two_workloads_is_two_groups(
        harness_factory: Callable[..., Harness]) -> None:
    other = {**JOBSET, "name": "other", "uid": "other-uid"}
    h = harness_factory(*_racks(1, 4), *_gang("leader", 1, owner=other), *_gang("workers", 3),
                        resources=LEVELS)
    h.cycle()
    assert _rack(h, "leader0") == "r0", "not the workers' group: placed as a gang of its own"


def test_a_gang_whose_fellows_run_already_joins_their_rack(
        harness_factory: Callable[..., Harness]) -> None:
    leader = _gang("leader", 1)
    leader[1]["spec"]["nodeName"] = "r1-0"
    h = harness_factory(*_racks(3, 4), *leader, *_gang("workers", 3), resources=LEVELS)
    h.cycle()
    assert {_rack(h, f"workers{i}") for i in range(3)} == {"r1"}


def test_a_gang_waits_while_the_other_gang_of_its_group_has_no_pods(
        harness_factory: Callable[..., Harness]) -> None:
    workers = _gang("workers", 3, ready=0)[0]
    workers["metadata"]["annotations"] = {
        names.KUEUE_PODSET_GROUP_ANNOTATION: "lw",
        names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL}
    h = harness_factory(*_racks(1, 4), *_gang("leader", 1), workers, resources=LEVELS)
    h.cycle()
    h.cycle()
    assert h.node_of("leader0") is None
    assert "waits for gang default/workers" in _reason(h, "leader0")


def test_gangs_sharing_a_node_in_the_joint_match_each_hold_their_own_pods_there(
        harness_factory: Callable[..., Harness]) -> None:
    nodes = [node(f"r{r}-{i}", cpu=8, labels={names.RACK_LABEL: f"r{r}"})
             for r, size in enumerate((1, 2)) for i in range(size)]
    h = harness_factory(*nodes, *_gang("leader", 1), *_gang("workers", 3), resources=LEVELS)
    h.cycle()
    placed = [h.node_of(p) for p in ("leader0", "workers0", "workers1", "workers2")]
    assert None not in placed and {str(n).split("-")[0] for n in placed} == {"r1"}, placed
    assert sorted(placed) == ["r1-0", "r1-0", "r1-1", "r1-1"], "two pods of 4 cores a node"
