"""DRA devices as vertices of the resource graph: where each hangs, and what it shows."""

from __future__ import annotations

from fluence_core.dra.state import DraState
from fluence_core.dra.vertices import DeviceVertices, device_rows
from fluence_core.graph import ResourceGraph
from fluence_core.kube.api import MODIFIED
from fluence_core.models import NodeInfo
from fluence_core.testing import (
    make_device, make_device_request, make_resource_claim_dict, make_resource_slice_dict,
)
from fluence_core.topology import parse_levels

DRIVER = "gpu.example.com"
RACK = "topology.kubernetes.io/rack"


def _graph(state: DraState, racks: dict[str, str]) -> ResourceGraph:
    graph = ResourceGraph([NodeInfo(name=n, cores=4, memory_mib=4096, labels={RACK: r})
                           for n, r in racks.items()], levels=parse_levels([RACK], "test"))
    graph.devices = DeviceVertices(state)
    return graph


def _paths(graph: ResourceGraph) -> list[str]:
    return sorted(v["metadata"]["paths"]["containment"]
                  for v in graph.to_jgf()["graph"]["nodes"]
                  if v["metadata"]["type"] == "device")


def test_a_node_local_device_hangs_under_its_node() -> None:
    state = DraState()
    state.replace("resourceslices", [make_resource_slice_dict(
        "a-gpus", DRIVER, [make_device("gpu0", {"model": "t4"})], node="a")])
    graph = _graph(state, {"a": "r1", "b": "r1"})
    assert _paths(graph) == ["/cluster0/r1/a/gpu.example.com:a:gpu0"]
    assert graph.summary()["devices"] == 1


def test_a_network_device_hangs_above_the_nodes_it_selects() -> None:
    """Selecting the nodes of rack r2 only, it hangs under r2; for all nodes, under the
    cluster (as the quantum backends do)."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": RACK, "operator": "In", "values": ["r2"]}]}]}
    state = DraState()
    state.replace("resourceslices", [
        make_resource_slice_dict("nics", DRIVER, [make_device("nic0")], node_selector=selector,
                                 pool="nics"),
        make_resource_slice_dict("everywhere", DRIVER, [make_device("fpga0")], pool="all")])
    graph = _graph(state, {"a": "r1", "b": "r2", "c": "r2"})
    assert _paths(graph) == ["/cluster0/gpu.example.com:all:fpga0",
                             "/cluster0/r2/gpu.example.com:nics:nic0"]
    nic = next(v for v in graph.device_vertices() if v.device == "nic0")
    assert nic.reaches == ("b", "c")


def test_the_graph_follows_a_pool_to_its_new_generation() -> None:
    state = DraState()
    state.replace("resourceslices", [make_resource_slice_dict(
        "a-gpus", DRIVER, [make_device("gpu0")], node="a")])
    graph = _graph(state, {"a": "r1"})
    state.handle("resourceslices", MODIFIED, make_resource_slice_dict(
        "a-gpus", DRIVER, [make_device("gpu7")], node="a", generation=2))
    assert [v.device for v in graph.device_vertices()] == ["gpu7"]
    state.handle("resourceslices", MODIFIED, make_resource_slice_dict(
        "a-more", DRIVER, [make_device("gpu8")], node="a", pool="a", generation=3,
        slice_count=2))
    assert graph.device_vertices() == []  # generation 3 is half there: nothing offered


def test_rows_show_each_vertex_free_or_held_by_its_claim() -> None:
    state = DraState()
    state.replace("resourceslices", [make_resource_slice_dict(
        "a-gpus", DRIVER, [make_device(f"gpu{i}", {"model": "t4"}) for i in range(2)],
        node="a")])
    claim = make_resource_claim_dict("held", [make_device_request("r", "gpu")])
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "a", "device": "gpu1"}]}}}
    state.replace("resourceclaims", [claim])
    graph = _graph(state, {"a": "r1"})
    rows = {r.device: (r.where, r.state, r.attributes)
            for r in device_rows(graph, state.inventory)}
    assert rows == {"gpu.example.com/a/gpu0": ("/cluster0/r1/a", "free", "model=t4"),
                    "gpu.example.com/a/gpu1": ("/cluster0/r1/a", "claim default/held",
                                               "model=t4")}
