"""fluence_core.graph with topology levels: real containment paths, in the graph and the JGF."""

from __future__ import annotations

from typing import Any

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.models import NodeInfo
from fluence_core.resource_config import parse_resource_config
from fluence_core.topology import Level

ZONE = Level(names.ZONE_LABEL, "zone")
RACK = Level(names.RACK_LABEL, "rack")


def node(name: str, zone: str | None, rack: str | None, cores: int = 2) -> NodeInfo:
    labels = {k: v for k, v in ((ZONE.label, zone), (RACK.label, rack)) if v is not None}
    return NodeInfo(name, cores, cores * 1024, labels=labels)


def two_zones() -> ResourceGraph:
    return ResourceGraph([node("a", "z1", "r1"), node("b", "z1", "r2"), node("c", "z2", "r1"),
                          node("d", None, "r9"), node("e", "z2", None)], levels=(ZONE, RACK))


def jgf_by_path(graph: ResourceGraph) -> dict[str, dict[str, Any]]:
    return {v["metadata"]["paths"]["containment"]: v for v in graph.to_jgf()["graph"]["nodes"]}


def test_a_node_sits_under_its_domain_at_every_level() -> None:
    graph = two_zones()
    assert graph.node_path("a") == "/cluster0/z1/r1/a"
    assert graph.node_path("c") == "/cluster0/z2/r1/c", "rack r1 of z2 is not rack r1 of z1"


def test_a_node_without_a_label_sits_in_that_levels_unknown_domain() -> None:
    graph = two_zones()
    unknown = names.TOPOLOGY_UNKNOWN_DOMAIN
    assert graph.node_path("d") == f"/cluster0/{unknown}/r9/d"
    assert graph.node_path("e") == f"/cluster0/z2/{unknown}/e"
    assert set(graph.domains(1)) == {("z1", "r1"), ("z1", "r2"), ("z2", "r1"), (unknown, "r9")}
    assert (("z2", unknown)) in graph.domains(1, known_only=False)


def test_the_jgf_holds_one_vertex_per_domain_typed_by_its_level_with_containment_edges() -> None:
    graph = two_zones()
    by_path = jgf_by_path(graph)
    zone = by_path["/cluster0/z1"]["metadata"]
    rack = by_path["/cluster0/z1/r2"]["metadata"]
    assert (zone["type"], zone["name"], zone["rank"]) == ("zone", "z1", -1)
    assert (rack["type"], rack["name"]) == ("rack", "r2")
    uid = {path: v["id"] for path, v in by_path.items()}
    edges = {(e["source"], e["target"]) for e in graph.to_jgf()["graph"]["edges"]}
    for path in by_path:
        if path != "/cluster0":
            assert (uid[path.rsplit("/", 1)[0]], uid[path]) in edges, path
    assert "/cluster0/z1/r1/a/core1" in by_path
    assert graph.vertex_count() == len(by_path)


def test_ids_of_domain_vertices_count_per_type() -> None:
    by_path = jgf_by_path(two_zones())
    racks = sorted(v["metadata"]["id"] for v in by_path.values() if v["metadata"]["type"] == "rack")
    assert racks == list(range(len(racks)))


def test_without_levels_the_graph_is_flat_as_before() -> None:
    graph = ResourceGraph([node("a", "z1", "r1")])
    assert graph.node_path("a") == "/cluster0/a"
    assert set(jgf_by_path(graph)) >= {"/cluster0", "/cluster0/a", "/cluster0/a/core0"}
    assert graph.node("a").domains == ()


def test_the_levels_come_from_the_resources_file_unless_given() -> None:
    config = parse_resource_config(
        f"topology:\n  levels: [{RACK.label}]\n", "resources.yaml")
    graph = ResourceGraph([node("a", "z1", "r1")], config)
    assert graph.levels == (RACK,) and graph.node_path("a") == "/cluster0/r1/a"


def test_a_virtual_resource_under_a_node_follows_the_nodes_path() -> None:
    config = parse_resource_config(
        "resources:\n  - {type: qpu, parent: a}\n", "resources.yaml")
    graph = ResourceGraph([node("a", "z1", "r1")], config, levels=(ZONE, RACK))
    assert graph.virtual[0].path == "/cluster0/z1/r1/a/qpu0"
    assert "/cluster0/z1/r1/a/qpu0" in jgf_by_path(graph)


def test_the_common_domain_of_nodes_is_the_narrowest_holding_them_all() -> None:
    graph = two_zones()
    assert graph.common_domain(["a"]) == ("z1", "r1")
    assert graph.common_domain(["a", "b"]) == ("z1",)
    assert graph.common_domain(["a", "c"]) == ()
