"""fluence_core.graph: the Fluxion-shaped resource graph and its JGF export."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fluence_core import names
from fluence_core.errors import ResourceConfigError
from fluence_core.graph import ResourceGraph
from fluence_core.models import NodeInfo, Taint
from fluence_core.resource_config import ResourceConfig, parse_resource_config
from fluence_core.testing import BRAKET_EXAMPLE, make_nodes

JGF_METADATA_KEYS = {
    "type",
    "basename",
    "name",
    "id",
    "uniq_id",
    "rank",
    "exclusive",
    "unit",
    "size",
    "paths",
}


def braket() -> ResourceConfig:
    return parse_resource_config(BRAKET_EXAMPLE, "braket.yaml")


def vertices_by_path(graph: ResourceGraph) -> dict[str, dict[str, Any]]:
    return {v["metadata"]["paths"]["containment"]: v for v in graph.to_jgf()["graph"]["nodes"]}


def props(vertex: dict[str, Any]) -> set[str]:
    return set(vertex["metadata"].get("properties", {}))


# -- shape ----------------------------------------------------------------------


def test_the_root_is_a_single_cluster_vertex() -> None:
    jgf = ResourceGraph(make_nodes(2)).to_jgf()
    roots = [v for v in jgf["graph"]["nodes"] if v["metadata"]["type"] == "cluster"]
    assert [r["metadata"]["paths"]["containment"] for r in roots] == ["/cluster0"]


def test_each_schedulable_node_is_a_node_vertex_with_its_rank() -> None:
    graph = ResourceGraph(make_nodes(3))
    found = vertices_by_path(graph)
    assert [found[f"/cluster0/node{i}"]["metadata"]["rank"] for i in range(3)] == [0, 1, 2]
    assert {found[f"/cluster0/node{i}"]["metadata"]["type"] for i in range(3)} == {"node"}


def test_real_nodes_carry_virtual_false() -> None:
    node = vertices_by_path(ResourceGraph(make_nodes(1)))["/cluster0/node0"]
    assert props(node) == {"virtual=false"}


def test_a_node_has_one_vertex_per_core() -> None:
    found = vertices_by_path(ResourceGraph([NodeInfo("n", 4, 4096)]))
    cores = [p for p, v in found.items() if v["metadata"]["type"] == "core"]
    assert sorted(cores) == [f"/cluster0/n/core{i}" for i in range(4)]


def test_a_node_has_one_vertex_per_gpu() -> None:
    found = vertices_by_path(ResourceGraph([NodeInfo("n", 4, 4096, gpus=2)]))
    assert sorted(p for p, v in found.items() if v["metadata"]["type"] == "gpu") == [
        "/cluster0/n/gpu0", "/cluster0/n/gpu1",
    ]


def test_memory_is_one_chunk_per_core_sized_node_memory_over_cores_in_mib() -> None:
    found = vertices_by_path(ResourceGraph([NodeInfo("n", 4, 10000)]))
    chunks = [v["metadata"] for v in found.values() if v["metadata"]["type"] == "memory"]
    assert len(chunks) == 4
    assert {(c["size"], c["unit"]) for c in chunks} == {(2500, "MiB")}


def test_memory_chunks_per_core_multiplies_the_chunks() -> None:
    graph = ResourceGraph([NodeInfo("n", 4, 8192)], memory_chunks_per_core=2)
    node = graph.node("n")
    assert (node.memory_chunks, node.chunk_mib) == (8, 1024)


def test_memory_that_does_not_divide_evenly_rounds_chunks_down() -> None:
    node = ResourceGraph([NodeInfo("n", 3, 1000)]).node("n")
    assert (node.memory_chunks, node.chunk_mib) == (3, 333)


def test_a_zone_label_becomes_a_zone_property() -> None:
    graph = ResourceGraph(
        [NodeInfo("n", 1, 1024, labels={"topology.kubernetes.io/zone": "zone-a"})]
    )
    assert graph.node("n").properties == frozenset({"virtual=false", "zone=zone-a"})


def test_a_cordoned_node_stays_in_marked_unschedulable() -> None:
    graph = ResourceGraph([NodeInfo("a", 2, 1024), NodeInfo("b", 2, 1024, unschedulable=True)])
    assert [(n.name, n.schedulable) for n in graph.nodes] == [("a", True), ("b", False)]


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_a_node_with_a_blocking_taint_stays_in_for_pods_tolerating_it(effect: str) -> None:
    tainted = NodeInfo("b", 2, 1024, taints=(Taint("dedicated", "infra", effect),))
    graph = ResourceGraph([NodeInfo("a", 2, 1024), tainted])
    assert graph.has_node("b") and not graph.node("b").schedulable


def test_a_prefer_no_schedule_node_stays_in() -> None:
    soft = NodeInfo("b", 2, 1024, taints=(Taint("k", "", "PreferNoSchedule"),))
    assert ResourceGraph([soft]).has_node("b")


# -- virtual resources ----------------------------------------------------------


def test_every_virtual_resource_at_every_level_is_a_node_typed_vertex() -> None:
    found = vertices_by_path(ResourceGraph(make_nodes(1), braket()))
    device = found["/cluster0/rigetti_cepheus0"]
    qpu = found["/cluster0/rigetti_cepheus0/qpu0"]
    qubit = found["/cluster0/rigetti_cepheus0/qpu0/qubit79"]
    assert {v["metadata"]["type"] for v in (device, qpu, qubit)} == {"node"}


def test_virtual_vertices_carry_virtual_true() -> None:
    graph = ResourceGraph(make_nodes(1), braket())
    assert all(
        "virtual=true" in v.properties and "virtual=false" not in v.properties
        for v in graph.virtual
    )


def test_a_virtual_vertex_has_a_class_for_its_own_and_every_descendant_type() -> None:
    found = vertices_by_path(ResourceGraph(make_nodes(1), braket()))
    classes = lambda path: {p for p in props(found[path]) if p.startswith("class=")}  # noqa: E731
    assert classes("/cluster0/rigetti_cepheus0") == {"class=qdevice", "class=qpu", "class=qubit"}
    assert classes("/cluster0/rigetti_cepheus0/qpu0") == {"class=qpu", "class=qubit"}
    assert classes("/cluster0/rigetti_cepheus0/qpu0/qubit0") == {"class=qubit"}


def test_a_virtual_vertex_carries_its_inherited_attributes_as_key_only_properties() -> None:
    qubit = vertices_by_path(ResourceGraph(make_nodes(1), braket()))[
        "/cluster0/rigetti_cepheus0/qpu0/qubit3"
    ]
    assert {
        "fluxion.flux-framework.org/provider=braket",
        "fluxion.flux-framework.org/region=us-east-1",
    } <= props(qubit)


def test_a_virtual_vertex_names_its_top_level_resource_as_backend() -> None:
    graph = ResourceGraph(make_nodes(1), braket())
    assert {v.backend for v in graph.virtual} == {"rigetti_cepheus"}
    assert all(
        "fluxion.flux-framework.org/backend=rigetti_cepheus" in v.properties for v in graph.virtual
    )


def test_a_count_makes_that_many_instances_each_with_the_children() -> None:
    config = parse_resource_config(
        "resources:\n  - {type: qpu, count: 2, with: [{type: qubit, count: 3}]}\n"
    )
    graph = ResourceGraph([], config)
    assert [v.type for v in graph.virtual].count("qpu") == 2
    assert [v.type for v in graph.virtual].count("qubit") == 6
    assert len(graph.virtual_roots) == 2


def test_virtual_resources_under_the_cluster_have_rank_minus_one() -> None:
    device = vertices_by_path(ResourceGraph(make_nodes(1), braket()))["/cluster0/rigetti_cepheus0"]
    assert device["metadata"]["rank"] == -1


def test_a_virtual_resource_with_a_node_parent_hangs_under_that_node_with_its_rank() -> None:
    config = parse_resource_config("resources:\n  - {type: licence, name: matlab, parent: node1}\n")
    graph = ResourceGraph(make_nodes(2), config)
    found = vertices_by_path(graph)
    licence = found["/cluster0/node1/matlab0"]
    assert licence["metadata"]["rank"] == 1
    edges = graph.to_jgf()["graph"]["edges"]
    assert {"source": found["/cluster0/node1"]["id"], "target": licence["id"]} in [
        {"source": e["source"], "target": e["target"]} for e in edges
    ]


def test_an_unknown_parent_fails_the_build_naming_the_file_and_entry() -> None:
    config = parse_resource_config("resources:\n  - {type: licence, parent: node9}\n", "res.yaml")
    with pytest.raises(
        ResourceConfigError, match=r"res.yaml: resources\[0\]: unknown parent 'node9'"
    ):
        ResourceGraph(make_nodes(2), config)


def test_virtual_subtree_is_the_vertex_and_its_descendants() -> None:
    graph = ResourceGraph([], braket())
    (root,) = graph.virtual_roots
    assert len(list(graph.virtual_subtree(root))) == 82


def test_virtual_types_are_every_type_in_the_config() -> None:
    assert ResourceGraph([], braket()).virtual_types == {"qdevice", "qpu", "qubit"}


# -- live changes without a rebuild ---------------------------------------------


def test_add_node_adds_a_node_with_the_next_rank() -> None:
    graph = ResourceGraph(make_nodes(2), braket())
    virtual_before = list(graph.virtual)
    graph.add_node(NodeInfo("new", 4, 4096))
    assert graph.node("new").rank == 2
    assert graph.virtual == virtual_before
    assert "/cluster0/new/core3" in vertices_by_path(graph)


def test_add_node_keeps_a_cordoned_node_marked() -> None:
    graph = ResourceGraph(make_nodes(1))
    assert not graph.add_node(NodeInfo("c", 4, 4096, unschedulable=True)).schedulable


def test_adding_a_node_twice_is_an_error() -> None:
    graph = ResourceGraph(make_nodes(1))
    with pytest.raises(ValueError, match="node0"):
        graph.add_node(NodeInfo("node0", 4, 4096))


def test_remove_node_takes_it_out_and_its_rank_is_not_reused() -> None:
    graph = ResourceGraph(make_nodes(3))
    graph.remove_node("node1")
    graph.add_node(NodeInfo("node3", 8, 8192))
    assert [(n.name, n.rank) for n in graph.nodes] == [("node0", 0), ("node2", 2), ("node3", 3)]
    assert "/cluster0/node1" not in vertices_by_path(graph)


def test_a_node_hosting_virtual_resources_cannot_be_removed() -> None:
    config = parse_resource_config("resources:\n  - {type: licence, parent: node0}\n")
    graph = ResourceGraph(make_nodes(1), config)
    with pytest.raises(ValueError, match="hosts virtual resources"):
        graph.remove_node("node0")


def test_set_down_marks_a_node_down_and_up_again() -> None:
    graph = ResourceGraph(make_nodes(2))
    graph.set_down("node1")
    assert graph.node("node1").down
    graph.set_down("node1", False)
    assert not graph.node("node1").down
    assert graph.vertex_count() == ResourceGraph(make_nodes(2)).vertex_count()


# -- size -----------------------------------------------------------------------


def test_vertex_count_is_about_two_per_core_plus_virtual() -> None:
    graph = ResourceGraph(make_nodes(10, cores=64, memory_mib=65536), braket())
    cores = 10 * 64
    assert graph.vertex_count() == 2 * cores + 10 + 1 + 82


def test_vertex_count_matches_the_jgf() -> None:
    graph = ResourceGraph(make_nodes(3, gpus=2), braket())
    assert graph.vertex_count() == len(graph.to_jgf()["graph"]["nodes"])


def test_summary_totals_nodes_cores_gpus_memory_and_vertices() -> None:
    graph = ResourceGraph(make_nodes(2, cores=4, memory_mib=4096, gpus=1), braket())
    assert graph.summary() == {
        "nodes": 2, "cores": 8, "gpus": 2, "memory_mib": 8192, "virtual": 82,
        "vertices": 1 + 2 * (1 + 4 + 1 + 4) + 82,
    }


def test_an_empty_graph_is_the_cluster_alone() -> None:
    graph = ResourceGraph().to_jgf()["graph"]
    assert [v["metadata"]["type"] for v in graph["nodes"]] == ["cluster"]
    assert graph["edges"] == []


# -- the JGF format Fluxion's reapi_cli accepts ---------------------------------


@pytest.fixture(scope="module")
def jgf() -> dict[str, Any]:
    nodes = make_nodes(3, cores=4, memory_mib=4096, gpus=1)
    nodes.append(NodeInfo("zoned", 2, 2048, labels={"topology.kubernetes.io/zone": "z"}))
    config = parse_resource_config(
        BRAKET_EXAMPLE + "  - {type: licence, parent: node2, count: 2, attributes: {seats: 5}}\n"
    )
    return ResourceGraph(nodes, config).to_jgf()


def test_jgf_vertex_ids_are_strings(jgf: dict[str, Any]) -> None:
    assert all(isinstance(v["id"], str) for v in jgf["graph"]["nodes"])


def test_jgf_vertex_ids_are_unique_and_equal_uniq_id(jgf: dict[str, Any]) -> None:
    ids = [v["id"] for v in jgf["graph"]["nodes"]]
    assert len(set(ids)) == len(ids)
    assert all(v["id"] == str(v["metadata"]["uniq_id"]) for v in jgf["graph"]["nodes"])


def test_every_jgf_vertex_has_the_metadata_fluxion_needs(jgf: dict[str, Any]) -> None:
    for vertex in jgf["graph"]["nodes"]:
        metadata = vertex["metadata"]
        assert JGF_METADATA_KEYS <= set(metadata), metadata
        assert isinstance(metadata["type"], str) and isinstance(metadata["basename"], str)
        assert isinstance(metadata["name"], str) and isinstance(metadata["unit"], str)
        assert all(isinstance(metadata[k], int) for k in ("id", "uniq_id", "rank", "size"))
        assert isinstance(metadata["exclusive"], bool)
        assert isinstance(metadata["paths"]["containment"], str)


def test_jgf_property_values_are_all_strings(jgf: dict[str, Any]) -> None:
    with_properties = [v for v in jgf["graph"]["nodes"] if "properties" in v["metadata"]]
    assert with_properties
    for vertex in with_properties:
        properties = vertex["metadata"]["properties"]
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())


def test_jgf_containment_paths_are_unique(jgf: dict[str, Any]) -> None:
    paths = [v["metadata"]["paths"]["containment"] for v in jgf["graph"]["nodes"]]
    assert len(set(paths)) == len(paths)


def test_jgf_edges_reference_existing_vertex_ids(jgf: dict[str, Any]) -> None:
    ids = {v["id"] for v in jgf["graph"]["nodes"]}
    for edge in jgf["graph"]["edges"]:
        assert edge["source"] in ids and edge["target"] in ids
        assert edge["metadata"]["name"] == {"containment": "contains"}


def test_jgf_edges_form_a_containment_tree_from_the_cluster(jgf: dict[str, Any]) -> None:
    vertices = {v["id"]: v["metadata"] for v in jgf["graph"]["nodes"]}
    parents: dict[str, str] = {}
    for edge in jgf["graph"]["edges"]:
        assert edge["target"] not in parents, "a vertex with two parents"
        parents[edge["target"]] = edge["source"]
    (root,) = set(vertices) - set(parents)
    assert vertices[root]["type"] == "cluster"
    for child, parent in parents.items():
        parent_path = vertices[parent]["paths"]["containment"]
        assert vertices[child]["paths"]["containment"].rsplit("/", 1)[0] == parent_path


def test_jgf_children_of_a_real_node_share_its_rank(jgf: dict[str, Any]) -> None:
    vertices = {v["id"]: v["metadata"] for v in jgf["graph"]["nodes"]}
    for edge in jgf["graph"]["edges"]:
        source, target = vertices[edge["source"]], vertices[edge["target"]]
        if source["type"] == "node" and "virtual=false" in source.get("properties", {}):
            assert target["rank"] == source["rank"]


def test_jgf_is_json_serialisable_and_round_trips(jgf: dict[str, Any]) -> None:
    assert json.loads(json.dumps(jgf)) == jgf


def test_jgf_node_vertices_are_named_after_the_kubernetes_node(jgf: dict[str, Any]) -> None:
    names = {
        v["metadata"]["name"] for v in jgf["graph"]["nodes"] if v["metadata"]["type"] == "node"
    }
    assert {"node0", "node1", "node2", "zoned"} <= names


def test_virtual_resources_under_a_cordoned_node_stay() -> None:
    from fluence_core.graph import ResourceGraph
    from fluence_core.models import NodeInfo
    from fluence_core.resource_config import parse_resource_config

    config = parse_resource_config(
        "resources:\n  - {type: licence, parent: n1, count: 2}\n", "r.yaml"
    )
    graph = ResourceGraph(
        [NodeInfo("n0", 4, 4096), NodeInfo("n1", 4, 4096, unschedulable=True)], config
    )
    assert [v.attach_to for v in graph.virtual] == ["n1", "n1"]


def test_the_jgf_text_escapes_what_json_must_and_lists_gpus_like_cores() -> None:
    config = parse_resource_config(
        'resources:\n  - type: qpu\n    name: q1\n    attributes: {site: "Z\\"ürich\\\\lab"}\n'
    )  # names are held to Kubernetes' rules, so the quote travels in an attribute value
    graph = ResourceGraph([NodeInfo("node0", 2, 2048, 1)], config)
    jgf = json.loads(graph.jgf_text())
    by_path = {v["metadata"]["paths"]["containment"]: v["metadata"]
               for v in jgf["graph"]["nodes"]}
    gpu = by_path["/cluster0/node0/gpu0"]
    assert (gpu["type"], gpu["name"], gpu["id"], gpu["size"]) == ("gpu", "gpu0", 0, 1)
    virtual = next(m for m in by_path.values() if m["basename"].startswith("q"))
    assert virtual["basename"] == "q1"
    assert names.attribute_property("site", 'Z"ürich\\lab') in virtual["properties"]


def test_covered_by_says_whether_a_set_holds_every_node_and_notices_a_new_node() -> None:
    graph = ResourceGraph([NodeInfo("a", 2, 2048), NodeInfo("b", 2, 2048)])
    both = frozenset({"a", "b", "unreadable"})
    assert graph.covered_by(both)
    assert not graph.covered_by(frozenset({"a"}))
    assert graph.covered_by(both), "asked again: remembered"
    graph.add_node(NodeInfo("c", 2, 2048))
    assert not graph.covered_by(both), "a node came that the set does not hold"
    graph.remove_node("c")
    assert graph.covered_by(both)
