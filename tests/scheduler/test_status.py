"""``fluence status``'s view, rebuilt read-only from what the cluster records."""

from __future__ import annotations

from typing import Callable

import pytest

from fluence_core import names
from fluence_core.kube.api import NODE_RESOURCE_TOPOLOGIES, PODGROUPS, PODS
from fluence_core.scheduler.core import Scheduler
from fluence_core.scheduler.status import NodeUse, collect_status
from fluence_core.settings import load_settings
from tests.scheduler.conftest import Harness, node, pod, pod_group
from tests.test_numa import nrt

QPU = """
resources:
  - type: qdevice
    name: cepheus
    with: [{type: qpu}]
"""


def test_status_shows_use_holders_and_why_groups_wait(
    harness_factory: Callable[..., Harness],
) -> None:
    theirs = pod("theirs", "1", scheduler="default-scheduler", node_name="n1")
    quantum = pod("q", "1", requests={"fluxion.flux-framework.org/qpu": "1"})
    members = [pod(f"g{i}", "2", group="g") for i in range(2)]
    h = harness_factory(
        node("n0"),
        node("n1"),
        theirs,
        quantum,
        pod_group("g", 2),
        *members,
        pod_group("big", 3),
        pod("big-0", group="big"),
        pod("huge", "64"),
        resources=QPU,
    )
    h.cycle()
    before = h.cluster.resource_version
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    report = collect_status(viewer)
    assert h.cluster.resource_version == before, "status writes nothing"
    uses = {n.name: n for n in report.nodes}
    assert uses["n0"].fluence_millicores + uses["n1"].fluence_millicores == 5000
    assert uses["n1"].other_millicores == 1000
    assert not uses["n0"].overcommitted and not uses["n1"].overcommitted
    assert report.virtual == [("/cluster0/cepheus0", "qdevice", "default/q")]
    owners = {h_.owner: h_ for h_ in report.held}
    assert owners["podgroups/default/g"].pods == ["g0", "g1"]
    why = {p.group: p.why for p in report.pending}
    assert "1 of 3 members ready" in why["default/big"]
    assert why["default/huge"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert h.cluster.get(PODS, "huge", "default")["spec"].get("nodeName") is None


def _status_of(h: Harness) -> dict[str, NodeUse]:
    viewer = Scheduler(h.cluster, load_settings(), read_only=True)
    viewer.start()
    return {n.name: n for n in collect_status(viewer).nodes}


def test_status_shows_what_bound_pods_request_and_flags_an_overcommitted_node(
    harness_factory: Callable[..., Harness],
) -> None:
    # 12 cpu of Fluence pods bound on a 4-cpu node, sized at pod level and by a sidecar
    sidecar = pod("side", "2", node_name="n0", sidecars=[{"cpu": "2"}])
    h = harness_factory(node("n0", cpu=4), node("n1", cpu=4),
                        pod("a", None, pod_requests={"cpu": "4"}, node_name="n0"),
                        pod("b", None, pod_requests={"cpu": "4"}, node_name="n0"), sidecar,
                        pod("theirs", None, pod_requests={"cpu": "3"}, node_name="n1",
                                   scheduler="default-scheduler"))
    uses = _status_of(h)
    assert (uses["n0"].fluence_millicores, uses["n0"].other_millicores) == (12000, 0)
    assert uses["n0"].free_millicores == -8000
    assert uses["n0"].overcommitted == ["cpu"]
    assert (uses["n1"].other_millicores, uses["n1"].free_millicores) == (3000, 1000)
    assert uses["n1"].overcommitted == []


def test_status_counts_memory_and_flags_it_when_overcommitted(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=4, memory="1Gi"),
                        pod("big", "1", node_name="n0", requests={"memory": "2Gi"}))
    use = _status_of(h)["n0"]
    assert (use.used_memory_mib, use.memory_mib) == (2048, 1024)
    assert use.overcommitted == ["memory"]


def test_status_leaves_finished_pods_out(harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0", cpu=4), pod("done", "3", node_name="n0"))
    h.finish("done")
    assert _status_of(h)["n0"].fluence_millicores == 0


def test_status_shows_each_topology_domain_with_what_is_free_of_it(
    harness_factory: Callable[..., Harness],
) -> None:
    racked = [node(name, labels={names.RACK_LABEL: rack})
              for name, rack in (("n0", "r1"), ("n1", "r1"), ("n2", "r2"))]
    group = pod_group("g", 2, topology=[names.RACK_LABEL])
    h = harness_factory(*racked, node("n3"),
                        group, pod("g0", "3", group="g"), pod("g1", "3", group="g"),
                        resources="topology:\n  levels: [topology.kubernetes.io/rack]\n")
    h.cycle()
    assert {h.node_of("g0"), h.node_of("g1")} == {"n0", "n1"}
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    rows = {row.domain: row for row in collect_status(viewer).domains}
    assert set(rows) == {("r1",), ("r2",), ("_unknown",)}
    assert (rows[("r1",)].room.cores, rows[("r1",)].room.free_cores) == (8, 2)
    assert (rows[("r2",)].room.cores, rows[("r2",)].room.free_cores) == (4, 4)
    assert rows[("r1",)].type == "rack" and rows[("_unknown",)].room.nodes == 1


def test_status_shows_each_numa_zone_with_what_is_free_of_it(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=8), node("flat", cpu=2),
                        pod("one", "3", annotations={names.SINGLE_NUMA_ANNOTATION: "true"}))
    h.cluster.create(NODE_RESOURCE_TOPOLOGIES, nrt("n0", ("node-0", "4", "0"),
                                                   ("node-1", "4", "0"),
                                                   policy="single-numa-node"))
    h.restart()
    h.cycle()
    assert h.node_of("one") == "n0"
    viewer = Scheduler(h.cluster, load_settings(), read_only=True)
    viewer.start()
    rows = {(row.node, row.zone): row.room for row in collect_status(viewer).zones}
    assert set(rows) == {("n0", "node-0"), ("n0", "node-1")}, "the flat node has none"
    assert sorted((room.cores, room.free_cores) for room in rows.values()) == [(4, 1), (4, 4)]


def test_status_shows_no_zones_where_no_node_publishes_them(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=4), pod("p", "1"))
    h.cycle()
    viewer = Scheduler(h.cluster, load_settings(), read_only=True)
    viewer.start()
    assert collect_status(viewer).zones == []


def test_status_shows_the_room_reserved_for_a_waiting_gang(
        harness_factory: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_RESERVE_AFTER_SECONDS", "30")
    monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)
    h = harness_factory(node("n0"), node("n1"), pod("hold-0", "4"), pod("hold-1", "4"))
    h.cycle()
    h.add(pod_group("big", 2), *(pod(f"big-{i}", "4", group="big") for i in range(2)))
    h.cycle()
    h.finish("hold-0")
    h.cycle(after=30)
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    report = collect_status(viewer)
    assert [(r.group, r.nodes, r.start) for r in report.reservations] == [
        ("default/big", {"n0": 4, "n1": 4}, None)], "hold-1 has no walltime: no start"


def test_status_shows_each_slice_of_a_held_group_and_the_rack_it_landed_in(
    harness_factory: Callable[..., Harness],
) -> None:
    racked = [node(name, labels={"example.com/block": "x", names.RACK_LABEL: rack})
              for name, rack in (("n0", "r3"), ("n1", "r3"), ("n2", "r3"),
                                 ("n3", "r2"), ("n4", "r2"))]
    slices = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: "example.com/block",
              names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
              names.KUEUE_SLICE_SIZE_ANNOTATION: "2"}
    h = harness_factory(*racked, pod_group("g", 4),
                        *(pod(f"g{i}", "4", group="g", annotations=slices) for i in range(4)),
                        resources="topology:\n  levels: [example.com/block, "
                                  "topology.kubernetes.io/rack]\n")
    h.cycle()
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    held = {g.owner: g for g in collect_status(viewer).held}["podgroups/default/g"]
    assert [(s.index, s.domain) for s in held.slices] == [(0, "x/r2"), (1, "x/r3")]
    assert all(len(s.nodes) == 2 for s in held.slices)


def test_status_names_a_topology_key_outside_the_hierarchy_and_who_uses_it(
    harness_factory: Callable[..., Harness],
) -> None:
    island = "example.com/island"
    h = harness_factory(node("n0", labels={island: "i0", names.RACK_LABEL: "r"}),
                        pod_group("g", 2, topology=[island]),
                        pod("g0", "3", group="g"), pod("g1", "3", group="g"),
                        resources="topology:\n  levels: [topology.kubernetes.io/rack]\n")
    h.cycle()  # one node of 4 cores: the gang of 6 waits
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    outside = collect_status(viewer).outside
    assert [(k.key, k.groups) for k in outside] == [(island, ["default/g"])]


def test_status_shows_the_group_of_podsets_of_each_gang_and_the_rack_it_holds(
    harness_factory: Callable[..., Harness],
) -> None:
    racked = [node(f"n{i}", labels={names.RACK_LABEL: "r1" if i else "r0"}) for i in range(5)]
    stated = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
              names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"}
    gangs = []
    for name, size in (("leader", 1), ("workers", 3), ("late", 2)):
        made = pod_group(name, size)
        made["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": "js",
                                                "controller": True}]
        gangs += [made, *(pod(f"{name}{i}", "4", group=name, annotations=stated)
                          for i in range(size if name != "late" else 1))]
    h = harness_factory(*racked, *gangs, resources="topology:\n  levels: [" +
                        names.RACK_LABEL + "]\n")
    h.cycle()  # "late" has 1 of 2 pods: the whole group waits
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    report = collect_status(viewer)
    assert {p.group: p.podset_group for p in report.pending} == {
        f"default/{name}": "group of PodSets lw of default/JobSet/js"
        for name in ("leader", "workers", "late")}
    h.cluster.delete(PODGROUPS, "late", "default")
    h.cluster.delete(PODS, "late0", "default")
    h.cycle()
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    held = {g.owner: (g.podset_group, g.domain) for g in collect_status(viewer).held}
    assert held == {f"podgroups/default/{name}": ("group of PodSets lw of default/JobSet/js",
                                                  "r1") for name in ("leader", "workers")}
