"""fluence_core.matcher.readback: allocations read back into a placement per pod."""

from __future__ import annotations

import pytest

from fluence_core.errors import MatcherError
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import COMPUTE
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.base import Allocation, NodeShare, VirtualShare
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.models import Group, PodRequest
from fluence_core.matcher.readback import read_placements


def share(node: str, cores: int, gpus: int = 0, memory_mib: int = 0) -> NodeShare:
    return NodeShare(
        node, cores=tuple(range(cores)), gpus=tuple(range(gpus)), memory_mib=memory_mib
    )


QPU = VirtualShare(
    path="/cluster0/rigetti_cepheus0/qpu0", type="qpu", name="qpu0", backend="rigetti_cepheus",
    attributes={"provider": "braket", "region": "us-east-1"},
)


def test_each_pod_gets_a_node_its_share_came_from() -> None:
    group = Group("g", (PodRequest("a", cores=4), PodRequest("b", cores=4)))
    allocation = Allocation(1, nodes=(share("n0", 4), share("n1", 4)))
    placements = read_placements(group, {COMPUTE: allocation})
    assert sorted(p.node or "" for p in placements.values()) == ["n0", "n1"]


def test_placements_are_keyed_by_namespace_and_name() -> None:
    group = Group("g", (PodRequest("a", namespace="hpc"),))
    assert list(read_placements(group, {COMPUTE: Allocation(1, nodes=(share("n0", 1),))})) == [
        "hpc/a"
    ]


def test_pods_sharing_a_node_split_its_cores_gpus_and_memory() -> None:
    pods = tuple(PodRequest(p, cores=2, gpus=1, memory_mib=100) for p in "abc")
    allocation = Allocation(
        1, nodes=(share("n0", 4, gpus=2, memory_mib=200), share("n1", 2, 1, memory_mib=100))
    )
    placements = read_placements(Group("g", pods), {COMPUTE: allocation})
    assert sorted(placements[f"default/{p}"].node or "" for p in "abc") == ["n0", "n0", "n1"]


def test_a_node_is_only_chosen_when_its_gpus_and_memory_also_cover_the_pod() -> None:
    group = Group("g", (PodRequest("a", cores=1, gpus=1, memory_mib=100),))
    allocation = Allocation(
        1, nodes=(share("n0", 4, gpus=0, memory_mib=100), share("n1", 1, 1, memory_mib=100))
    )
    assert read_placements(group, {COMPUTE: allocation})["default/a"].node == "n1"


def test_an_allocation_that_does_not_cover_the_pods_is_a_matcher_error() -> None:
    group = Group("g", (PodRequest("a", cores=4), PodRequest("b", cores=4)))
    with pytest.raises(MatcherError, match="does not cover"):
        read_placements(group, {COMPUTE: Allocation(1, nodes=(share("n0", 6),))})


def test_a_pod_with_a_virtual_resource_gets_its_backend_and_attributes() -> None:
    group = Group("g", (PodRequest("scout", virtual={"qpu": 1}), PodRequest("worker")))
    placements = read_placements(group, {
        COMPUTE: Allocation(1, nodes=(share("n0", 2),)),
        "qpu": Allocation(2, virtual=(QPU,)),
    })
    scout = placements["default/scout"]
    assert (scout.node, scout.backend) == ("n0", "rigetti_cepheus")
    assert scout.attributes == {"provider": "braket", "region": "us-east-1"}
    assert scout.virtual == {"qpu": ["qpu0"]}


def test_a_pod_without_virtual_requests_has_no_backend() -> None:
    group = Group("g", (PodRequest("scout", virtual={"qpu": 1}), PodRequest("worker")))
    placements = read_placements(group, {
        COMPUTE: Allocation(1, nodes=(share("n0", 2),)),
        "qpu": Allocation(2, virtual=(QPU,)),
    })
    worker = placements["default/worker"]
    assert (worker.backend, worker.attributes) == (None, {})


def test_virtual_shares_are_dealt_to_pods_in_order() -> None:
    qubits = tuple(
        VirtualShare(path=f"/q/qubit{i}", type="qubit", name=f"qubit{i}", backend="b")
        for i in range(3)
    )
    group = Group(
        "g", (PodRequest("a", virtual={"qubit": 1}), PodRequest("b", virtual={"qubit": 2}))
    )
    placements = read_placements(group, {"qubit": Allocation(1, virtual=qubits)})
    assert placements["default/a"].virtual == {"qubit": ["qubit0"]}
    assert placements["default/b"].virtual == {"qubit": ["qubit1", "qubit2"]}


def test_too_few_virtual_shares_is_a_matcher_error_naming_the_pod() -> None:
    group = Group("g", (PodRequest("a", virtual={"qpu": 2}),))
    with pytest.raises(MatcherError, match="default/a"):
        read_placements(group, {"qpu": Allocation(7, virtual=(QPU,))})


def test_without_a_compute_allocation_pods_have_no_node() -> None:
    group = Group("g", (PodRequest("a"),))
    assert read_placements(group, {})["default/a"].node is None


def test_a_matched_hybrid_group_reads_back_a_node_per_pod_and_the_backend(
    small_graph: ResourceGraph,
) -> None:
    group = Group(
        "g",
        (
            PodRequest(
                "scout",
                cores=2,
                memory_mib=1024,
                virtual={"qpu": 1},
                requires={"provider": "braket"},
            ),
            PodRequest("w1", cores=8),
            PodRequest("w2", cores=8),
        ),
    )
    result = match_group(group, small_graph, EmbeddedMatcher(small_graph))
    assert isinstance(result, GroupMatch)
    nodes = {key: p.node for key, p in result.placements.items()}
    assert set(nodes) == {"default/scout", "default/w1", "default/w2"}
    assert all(node in {n.name for n in small_graph.nodes} for node in nodes.values())
    assert nodes["default/w1"] != nodes["default/w2"]  # 8 cores each fill a node
    assert result.placements["default/scout"].backend == "rigetti_cepheus"
    assert result.placements["default/scout"].attributes["provider"] == "braket"


def test_a_heterogeneous_group_reads_each_shape_from_its_own_compute_allocation() -> None:
    group = Group(
        "g",
        (PodRequest("small", cores=1), PodRequest("big", cores=8), PodRequest("small2", cores=1)),
    )
    placements = read_placements(group, {
        "compute": Allocation(1, nodes=(share("n0", 1), share("n1", 1))),
        "compute-1": Allocation(2, nodes=(share("n2", 8),)),
    })
    assert placements["default/big"].node == "n2"
    assert sorted(placements[k].node or "" for k in ("default/small", "default/small2")) == [
        "n0",
        "n1",
    ]


def test_a_gang_of_a_thousand_alike_pods_is_read_back_node_by_node() -> None:
    group = Group("g", tuple(PodRequest(f"p{i}", cores=2, memory_mib=100) for i in range(1000)))
    allocation = Allocation(1, nodes=tuple(share(f"n{i}", 32, memory_mib=1600)
                                           for i in range(63)))  # 16 pods each, 1008 slots
    placements = read_placements(group, {COMPUTE: allocation})
    per_node: dict[str, int] = {}
    for placement in placements.values():
        assert placement.node is not None
        per_node[placement.node] = per_node.get(placement.node, 0) + 1
    assert max(per_node.values()) == 16 and sum(per_node.values()) == 1000


def test_alike_pods_the_shares_cannot_cover_are_a_matcher_error() -> None:
    group = Group("g", tuple(PodRequest(f"p{i}", cores=2) for i in range(3)))
    with pytest.raises(MatcherError, match="does not cover"):
        read_placements(group, {COMPUTE: Allocation(1, nodes=(share("n0", 5),))})
