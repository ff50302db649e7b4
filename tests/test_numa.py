"""fluence_core.numa: a node's NUMA zones read from its NodeResourceTopology, and laid out
as id ranges in the graph (cores, GPUs and memory chunks under one numanode vertex each)."""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.models import NodeInfo
from fluence_core.numa import NodeNuma, NumaZone, ZoneLoad, read_nrt, shares, spans
from fluence_core.testing import make_pod_dict


def nrt(name: str = "n0", *zones: tuple[str, str, str], policy: str | None = None,
        **extra: Any) -> dict[str, Any]:
    """A NodeResourceTopology as the NFD topology-updater publishes it: zones of type Node
    with (name, cpu, gpus)."""
    body: dict[str, Any] = {
        "apiVersion": f"{names.NRT_GROUP}/v1alpha2", "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "zones": [{"name": zone, "type": "Node", "resources": [
            {"name": "cpu", "capacity": cpu, "allocatable": cpu, "available": "1"},
            {"name": "memory", "capacity": "8Gi", "allocatable": "8Gi", "available": "1Gi"},
            {"name": names.GPU_RESOURCE, "capacity": gpu, "allocatable": gpu, "available": "0"},
        ]} for zone, cpu, gpu in zones], **extra}
    if policy is not None:
        body["attributes"] = [{"name": "topologyManagerPolicy", "value": policy},
                              {"name": "topologyManagerScope", "value": "container"}]
    return body


def test_zones_of_type_node_are_the_numa_nodes_with_their_allocatable_cpus_gpus_and_memory(
        ) -> None:
    body = nrt("n0", ("node-0", "16", "2"), ("node-1", "14", "2"))
    body["zones"].append({"name": "cache-0", "type": "L3Cache"})
    assert read_nrt(body) == NodeNuma((NumaZone("node-0", 16, 2, 8192),
                                       NumaZone("node-1", 14, 2, 8192)))


def test_a_zone_reporting_no_memory_has_none() -> None:
    body = nrt("n0", ("node-0", "4", "0"))
    body["zones"][0]["resources"] = [r for r in body["zones"][0]["resources"]
                                     if r["name"] != "memory"]
    assert read_nrt(body).zones[0].memory_mib is None


def test_memory_chunks_are_shared_out_in_proportion_to_the_zones_memory() -> None:
    assert shares((12288, 4096), 16) == ((0, 12), (12, 16))
    assert shares((8192, 8192), 8) == ((0, 4), (4, 8))     # more reported than the node has
    assert shares((1, 1, 1), 8) == ((0, 2), (2, 5), (5, 8))  # the last takes what is left
    assert shares((0, 0), 4) == ((0, 2), (2, 4))


def test_a_zones_memory_chunks_follow_its_reported_memory_not_its_cores() -> None:
    zones = (NumaZone("node-0", 4, 0, 12 * 1024), NumaZone("node-1", 4, 0, 4 * 1024))
    graph = ResourceGraph([NodeInfo("n0", 8, 16 * 1024, numa=NodeNuma(zones))])
    node = graph.node("n0")
    assert [z.memory for z in node.zones] == [(0, 6), (6, 8)]      # chunks of 2 GiB
    assert [z.cores for z in node.zones] == [(0, 4), (4, 8)]


def test_where_a_zone_reports_no_memory_chunks_follow_the_cores() -> None:
    zones = (NumaZone("node-0", 6, 0, 12 * 1024), NumaZone("node-1", 2, 0, None))
    graph = ResourceGraph([NodeInfo("n0", 8, 16 * 1024, numa=NodeNuma(zones))])
    assert [z.memory for z in graph.node("n0").zones] == [(0, 6), (6, 8)]


def test_the_kubelets_single_numa_node_policy_is_read_from_the_attributes() -> None:
    assert read_nrt(nrt("n0", ("node-0", "4", "0"), policy="single-numa-node")).single_numa_policy
    assert not read_nrt(nrt("n0", ("node-0", "4", "0"), policy="best-effort")).single_numa_policy
    old = nrt("n0", ("node-0", "4", "0"), topologyPolicies=["SingleNUMANodePodLevel"])
    assert read_nrt(old).single_numa_policy


@pytest.mark.parametrize(("body", "why"), [
    ({"metadata": {"name": "n0"}, "zones": "x"}, "NodeResourceTopology n0: zones is not a list"),
    ({"metadata": {"name": "n0"}, "zones": [{"type": "Node"}]}, "zones[0].name is missing"),
    ({"metadata": {"name": "n0"}, "zones": [{"name": "z", "type": "Node", "resources": [
        {"name": "cpu", "allocatable": "lots"}]}]}, "zones[0].resources[0] (cpu)"),
])
def test_an_unreadable_object_is_an_error_naming_the_field(body: dict[str, Any],
                                                           why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        read_nrt(body)


def test_zones_are_trimmed_or_grown_to_the_nodes_own_total() -> None:
    assert spans((4, 4), 8) == ((0, 4), (4, 8))
    assert spans((4, 4), 6) == ((0, 4), (4, 6))          # the node's allocatable is less
    assert spans((3, 3), 8) == ((0, 3), (3, 8))          # the last zone takes the rest
    assert spans((8, 8), 4) == ((0, 4), (4, 4))


def _zoned(numa: NodeNuma | None) -> ResourceGraph:
    return ResourceGraph([NodeInfo("n0", 8, 8192, 2, numa=numa)])


def test_the_jgf_hangs_a_nodes_cores_gpus_and_memory_under_its_numa_zones() -> None:
    graph = _zoned(NodeNuma((NumaZone("node-0", 4, 1), NumaZone("node-1", 4, 1))))
    vertices = {v["metadata"]["paths"]["containment"]: v["metadata"]
                for v in graph.to_jgf()["graph"]["nodes"]}
    assert vertices["/cluster0/n0/numanode1"]["type"] == "numanode"
    assert vertices["/cluster0/n0/numanode1/core5"]["id"] == 5
    assert "/cluster0/n0/numanode0/gpu0" in vertices and "/cluster0/n0/numanode1/gpu1" in vertices
    assert "/cluster0/n0/numanode1/memory7" in vertices
    assert graph.vertex_path("n0", "core", 5) == "/cluster0/n0/numanode1/core5"
    assert graph.vertex_count() == len(vertices)


def test_without_numa_the_jgf_keeps_every_vertex_under_the_node() -> None:
    graph = _zoned(NodeNuma((NumaZone("node-0", 4), NumaZone("node-1", 4))))
    paths = {v["metadata"]["paths"]["containment"]
             for v in graph.to_jgf(numa=ZoneLoad.NONE)["graph"]["nodes"]}
    assert "/cluster0/n0/core5" in paths and not any("numanode" in p for p in paths)
    assert graph.vertex_path("n0", "core", 5, numa=ZoneLoad.NONE) == "/cluster0/n0/core5"
    assert _zoned(None).vertex_path("n0", "core", 5) == "/cluster0/n0/core5"


def test_guaranteed_is_the_kubelets_qos_class() -> None:
    from fluence_core.pod_requests import is_guaranteed

    both = {"cpu": "2", "memory": "1Gi"}
    less = {"cpu": "1", "memory": "1Gi"}
    assert is_guaranteed(make_pod_dict("p", None, limits=both))   # requests default to limits
    assert is_guaranteed(make_pod_dict("p", None, extra=both, limits=both))
    assert not is_guaranteed(make_pod_dict("p", None, extra=both))  # no limits: burstable
    assert not is_guaranteed(make_pod_dict("p", None, extra=less, limits=both))
    assert not is_guaranteed(make_pod_dict("p", None, limits={"cpu": "2"}))  # memory unlimited
