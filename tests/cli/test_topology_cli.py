"""``fluence graph`` and ``fluence plan`` with topology levels: the hierarchy, and why there."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from fluence_core import names
from fluence_core.testing import make_node_dict, make_pod_dict
from tests.test_cli import failed, fluence, ok
from tests.test_numa import nrt

pytestmark = pytest.mark.usefixtures("clean_env")
LEVELS = f"topology:\n  levels: [{names.ZONE_LABEL}, {names.RACK_LABEL}]\n"


def _cluster(write_yaml: Callable[..., Path]) -> tuple[Path, Path]:
    nodes = [make_node_dict(f"r{r}-n{n}", 4, "16Gi", zone=f"z{r // 2}",
                            labels={names.RACK_LABEL: f"r{r}"})
             for r in range(3) for n in range(2)]
    return write_yaml("nodes.yaml", *nodes), write_yaml("resources.yaml", text=LEVELS)


def test_graph_shows_each_domain_under_its_parent_with_its_capacity(
    write_yaml: Callable[..., Path],
) -> None:
    nodes, resources = _cluster(write_yaml)
    output = ok(fluence("graph", "--nodes", nodes, "--resources", resources))
    assert "Topology (capacity per domain)" in output
    lines = [line for line in output.splitlines() if " rack " in line or " zone " in line]
    assert [line.split("│")[1].rstrip() for line in lines] == [
        " z0", "   r0", "   r1", " z1", "   r2"]


def test_graph_jgf_holds_the_domain_vertices(write_yaml: Callable[..., Path]) -> None:
    nodes, resources = _cluster(write_yaml)
    output = ok(fluence("graph", "--nodes", nodes, "--resources", resources, "--jgf"))
    assert '"paths":{"containment":"/cluster0/z0/r1/r1-n0"}' in output
    assert '"type":"rack","basename":"rack","name":"r2"' in output


def test_plan_explains_the_levels_tried_and_the_domain_chosen(
    write_yaml: Callable[..., Path],
) -> None:
    nodes, resources = _cluster(write_yaml)
    preferred = {names.TOPOLOGY_PREFERRED_ANNOTATION: "rack"}
    pods = write_yaml("pods.yaml", *(make_pod_dict(f"p{i}", "2", annotations=preferred)
                                     for i in range(5)))
    output = ok(fluence("plan", pods, "--nodes", nodes, "--resources", resources))
    assert "levels tried in turn: rack, zone, anywhere" in output
    assert "one rack: no rack held it (needs 10 cores; the most free in one rack is 8" in output
    assert "one zone: placed in zone z0" in output
    assert '{"type":"rack","count":1,"with":[{"type":"slot","count":5' in output


def test_plan_of_a_gang_too_big_for_its_required_rack_exits_1_naming_the_best_rack(
    write_yaml: Callable[..., Path],
) -> None:
    nodes, resources = _cluster(write_yaml)
    required = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL}
    pods = write_yaml("pods.yaml", *(make_pod_dict(f"p{i}", "2", annotations=required)
                                     for i in range(5)))
    output = failed(fluence("plan", pods, "--nodes", nodes, "--resources", resources), code=1)
    assert "must stay inside one rack" in output and "lacks 2 cores" in output


def test_graph_shows_each_nodes_numa_zones_from_the_topology_objects_beside_the_nodes(
    write_yaml: Callable[..., Path],
) -> None:
    zoned = make_node_dict("zoned", 8, "8Gi")
    topology = nrt("zoned", ("node-0", "6", "0"), ("node-1", "2", "0"), policy="single-numa-node")
    for zone, memory in zip(topology["zones"], ("6Gi", "2Gi")):  # the zones' own memory
        for entry in zone["resources"]:
            if entry["name"] == "memory":
                entry["allocatable"] = entry["capacity"] = memory
    nodes = write_yaml("nodes.yaml", zoned, make_node_dict("flat", 4, "4Gi"), topology)
    output = ok(fluence("graph", "--nodes", nodes))
    assert "NUMA zones (capacity per zone)" in output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in output.splitlines() if "node-" in line]
    assert rows == [["zoned", "node-0", "6", "0", "6144", "single-numa-node"],
                    ["zoned", "node-1", "2", "0", "2048", "single-numa-node"]]


def test_graph_without_topology_objects_shows_no_numa_zones(
    write_yaml: Callable[..., Path],
) -> None:
    nodes = write_yaml("nodes.yaml", make_node_dict("flat", 4, "4Gi"))
    assert "NUMA zones" not in ok(fluence("graph", "--nodes", nodes))


def test_graph_names_a_topology_object_without_a_name(write_yaml: Callable[..., Path]) -> None:
    topology = nrt("x", ("node-0", "2", "0"))
    del topology["metadata"]["name"]
    nodes = write_yaml("nodes.yaml", make_node_dict("flat", 4, "4Gi"), topology)
    assert "NodeResourceTopology without metadata.name" in failed(
        fluence("graph", "--nodes", nodes))


def test_plan_shows_each_slice_and_the_rack_it_landed_in(
    write_yaml: Callable[..., Path],
) -> None:
    # zone z0 holds racks r0 and r1 of two 4-core nodes each
    nodes, resources = _cluster(write_yaml)
    slices = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.ZONE_LABEL,
              names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
              names.KUEUE_SLICE_SIZE_ANNOTATION: "2"}
    pods = write_yaml("pods.yaml", *(make_pod_dict(f"p{i}", "4", annotations=slices)
                                     for i in range(4)))
    output = ok(fluence("plan", pods, "--nodes", nodes, "--resources", resources))
    assert f"slices 2 pods per {names.RACK_LABEL}" in output
    assert f"2 slices placed, each inside one domain of {names.RACK_LABEL}" in output
    assert "Slices (each inside one domain of every slice layer)" in output
    assert f"{names.RACK_LABEL}=z0/r0" in output and f"{names.RACK_LABEL}=z0/r1" in output


def test_plan_says_a_key_that_is_no_level_is_a_node_label(
    write_yaml: Callable[..., Path],
) -> None:
    nodes, resources = _cluster(write_yaml)
    required = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: "example.com/island"}
    pods = write_yaml("pods.yaml", make_pod_dict("p0", "2", annotations=required))
    output = failed(fluence("plan", pods, "--nodes", nodes, "--resources", resources), code=1)
    assert "inside one domain of node label example.com/island (no configured level" in output
    assert "no node has the label example.com/island" in output
