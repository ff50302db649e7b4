"""fluence_core.matcher.jobspec: groups of pods become Fluxion jobspecs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fluence_core.errors import UnknownResourceTypeError
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import COMPUTE, compute_jobspec, group_jobspecs, virtual_jobspec
from fluence_core.models import Group, PodRequest
from fluence_core.testing import make_pod_dict


def compute_of(group: Group, graph: ResourceGraph) -> dict[str, Any]:
    specs = group_jobspecs(group, graph)
    assert specs[0].kind == COMPUTE
    return specs[0].jobspec


def slots(jobspec: dict[str, Any]) -> list[dict[str, Any]]:
    return jobspec["resources"]


def is_compute_kind(kind: str) -> bool:
    return kind == COMPUTE or kind.startswith(f"{COMPUTE}-")


def compute_slots(group: Group, graph: ResourceGraph) -> list[dict[str, Any]]:
    """Every slot entry of the group's compute jobspec(s), in order."""
    return [
        slot
        for spec in group_jobspecs(group, graph)
        if is_compute_kind(spec.kind)
        for slot in slots(spec.jobspec)
    ]


def inner(slot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["type"]: r for r in slot["with"]}


# -- the compute jobspec --------------------------------------------------------


def test_a_group_of_identical_pods_has_one_compute_jobspec(
    small_graph: ResourceGraph, pod_group: Group
) -> None:
    specs = group_jobspecs(pod_group, small_graph)
    assert [s.kind for s in specs] == [COMPUTE]


def test_a_pod_slot_holds_its_cores_memory_in_mib_and_gpus(small_graph: ResourceGraph) -> None:
    group = Group("g", (PodRequest("p", cores=3, memory_mib=2048, gpus=1),))
    (slot,) = slots(compute_of(group, small_graph))
    assert slot["type"] == "slot" and slot["count"] == 1
    assert inner(slot) == {
        "core": {"type": "core", "count": 3},
        "gpu": {"type": "gpu", "count": 1},
        "memory": {"type": "memory", "count": 2048, "unit": "MiB"},
    }


def test_a_slot_leaves_out_gpus_and_memory_not_asked_for(small_graph: ResourceGraph) -> None:
    (slot,) = slots(compute_of(Group("g", (PodRequest("p", cores=2),)), small_graph))
    assert slot["with"] == [{"type": "core", "count": 2}]


def test_a_fractional_cpu_is_asked_in_millicores_from_the_pool(small_graph: ResourceGraph) -> None:
    pod = PodRequest.from_kube(make_pod_dict("p", cpu="2500m"))
    (slot,) = slots(compute_of(Group("g", (pod,)), small_graph))
    assert inner(slot)["millicores"]["count"] == 2500 and "core" not in inner(slot)


def test_whole_cpus_are_asked_as_exclusive_cores(small_graph: ResourceGraph) -> None:
    pod = PodRequest.from_kube(make_pod_dict("p", cpu="3"))
    (slot,) = slots(compute_of(Group("g", (pod,)), small_graph))
    assert inner(slot)["core"]["count"] == 3


def test_a_pod_asking_no_cpu_asks_the_pool_for_none(small_graph: ResourceGraph) -> None:
    pod = PodRequest.from_kube(make_pod_dict("p", cpu=None))
    (slot,) = slots(compute_of(Group("g", (pod,)), small_graph))
    assert inner(slot) == {"millicores": {"type": "millicores", "count": 0}}


def test_slot_memory_uses_the_same_mib_unit_as_the_graph(small_graph: ResourceGraph) -> None:
    pod = PodRequest.from_kube(make_pod_dict("p", memory="3Gi"))
    (slot,) = slots(compute_of(Group("g", (pod,)), small_graph))
    assert inner(slot)["memory"] == {"type": "memory", "count": 3072, "unit": "MiB"}
    jgf_units = {v["metadata"]["unit"] for v in small_graph.to_jgf()["graph"]["nodes"]
                 if v["metadata"]["type"] == "memory"}
    assert jgf_units == {"MiB"}


def test_identical_pods_share_one_slot_entry_with_a_count(
    small_graph: ResourceGraph, pod_group: Group
) -> None:
    (slot,) = slots(compute_of(pod_group, small_graph))
    assert slot["count"] == 3
    assert inner(slot)["core"]["count"] == 2


def test_heterogeneous_pods_get_separate_slots(small_graph: ResourceGraph) -> None:
    group = Group("g", (
        PodRequest("scout", cores=2, memory_mib=4096),
        PodRequest("w1", cores=8), PodRequest("w2", cores=8),
        PodRequest("trainer", cores=4, gpus=1),
    ))
    entries = compute_slots(group, small_graph)
    assert [(s["count"], inner(s)["core"]["count"]) for s in entries] == [(1, 2), (2, 8), (1, 4)]
    assert [sorted(inner(s)) for s in entries] == [["core", "memory"], ["core"], ["core", "gpu"]]


def test_compute_slots_add_up_to_one_per_pod(small_graph: ResourceGraph) -> None:
    group = Group("g", tuple(PodRequest(f"p{i}", cores=1 + i % 2) for i in range(5)))
    assert sum(s["count"] for s in compute_slots(group, small_graph)) == 5


def test_every_compute_jobspec_is_constrained_to_virtual_false(small_graph: ResourceGraph) -> None:
    group = Group(
        "g", (PodRequest("a", cores=1), PodRequest("b", cores=2), PodRequest("c", gpus=1))
    )
    for spec in group_jobspecs(group, small_graph):
        assert is_compute_kind(spec.kind)
        assert spec.jobspec["attributes"]["system"]["constraints"] == {
            "properties": ["virtual=false"]
        }


def test_every_slot_has_one_task(small_graph: ResourceGraph) -> None:
    group = Group("g", (PodRequest("a", cores=1), PodRequest("b", cores=2)))
    for spec in group_jobspecs(group, small_graph):
        tasks = spec.jobspec["tasks"]
        assert [t["slot"] for t in tasks] == [s["label"] for s in slots(spec.jobspec)]
        assert all(t["count"] == {"per_slot": 1} and t["command"] for t in tasks)


def test_the_compute_jobspec_is_constrained_to_virtual_false(
    small_graph: ResourceGraph, pod_group: Group
) -> None:
    constraints = compute_of(pod_group, small_graph)["attributes"]["system"]["constraints"]
    assert constraints == {"properties": ["virtual=false"]}


def test_excluded_nodes_add_a_hostlist_exclusion(
    small_graph: ResourceGraph, pod_group: Group
) -> None:
    (spec,) = group_jobspecs(pod_group, small_graph, exclude_nodes=["node3", "node1"])
    assert spec.jobspec["attributes"]["system"]["constraints"] == {
        "and": [{"properties": ["virtual=false"]}, {"not": [{"hostlist": ["node1", "node3"]}]}]
    }


def test_jobspecs_have_duration_zero_held_until_cancelled(small_graph: ResourceGraph) -> None:
    group = Group("g", (PodRequest("p", virtual={"qpu": 1}),))
    for spec in group_jobspecs(group, small_graph):
        assert spec.jobspec["attributes"]["system"]["duration"] == 0
        assert spec.jobspec["version"] == 1


# -- virtual jobspecs -----------------------------------------------------------


def test_each_virtual_type_gets_its_own_jobspec_in_first_seen_order(
    small_graph: ResourceGraph,
) -> None:
    group = Group("g", (PodRequest("a", virtual={"qubit": 4}), PodRequest("b", virtual={"qpu": 1})))
    assert [s.kind for s in group_jobspecs(group, small_graph)] == [COMPUTE, "qubit", "qpu"]


def test_a_virtual_jobspec_asks_for_whole_node_vertices_summed_over_pods(
    small_graph: ResourceGraph,
) -> None:
    group = Group(
        "g", (PodRequest("a", virtual={"qubit": 4}), PodRequest("b", virtual={"qubit": 3}))
    )
    qubit = group_jobspecs(group, small_graph)[1].jobspec
    assert qubit["resources"] == [
        {"type": "slot", "count": 7, "label": "qubit", "with": [{"type": "node", "count": 1}]}
    ]


def test_a_virtual_jobspec_is_constrained_to_virtual_true_and_its_class(
    small_graph: ResourceGraph,
) -> None:
    group = Group("g", (PodRequest("a", virtual={"qpu": 1}),))
    qpu = group_jobspecs(group, small_graph)[1].jobspec
    assert qpu["attributes"]["system"]["constraints"] == {
        "properties": ["virtual=true", "class=qpu"]
    }


def test_require_annotations_pin_attributes_in_the_virtual_jobspec(
    small_graph: ResourceGraph,
) -> None:
    pod = PodRequest.from_kube(make_pod_dict(
        "scout",
        extra={"fluxion.flux-framework.org/qpu": "1"},
        annotations={
            "fluence.flux-framework.org/require-region": "us-east-1",
            "fluence.flux-framework.org/require-provider": "braket",
        },
    ))
    qpu = group_jobspecs(Group("g", (pod,)), small_graph)[1].jobspec
    assert qpu["attributes"]["system"]["constraints"]["properties"] == [
        "virtual=true",
        "class=qpu",
        "fluxion.flux-framework.org/provider=braket",
        "fluxion.flux-framework.org/region=us-east-1",
    ]


def test_pins_of_pods_not_asking_for_the_type_do_not_apply(small_graph: ResourceGraph) -> None:
    group = Group("g", (
        PodRequest("a", virtual={"qpu": 1}),
        PodRequest("b", requires={"region": "eu"}),
    ))
    qpu = group_jobspecs(group, small_graph)[1].jobspec
    assert qpu["attributes"]["system"]["constraints"]["properties"] == ["virtual=true", "class=qpu"]


def test_the_compute_jobspec_holds_no_virtual_request(small_graph: ResourceGraph) -> None:
    group = Group("g", (PodRequest("a", cores=2, virtual={"qpu": 1}),))
    (slot,) = slots(compute_of(group, small_graph))
    assert set(inner(slot)) == {"core"}


def test_a_type_the_graph_lacks_is_a_clear_error_naming_pod_and_type(
    small_graph: ResourceGraph,
) -> None:
    group = Group("g", (PodRequest("scout", namespace="q", virtual={"ionq": 1}),))
    with pytest.raises(UnknownResourceTypeError) as caught:
        group_jobspecs(group, small_graph)
    message = str(caught.value)
    assert "q/scout" in message
    assert "fluxion.flux-framework.org/ionq" in message
    assert "qdevice" in message  # it lists what the graph does have


def test_a_virtual_request_on_a_classical_graph_says_none_are_known() -> None:
    group = Group("g", (PodRequest("p", virtual={"qpu": 1}),))
    with pytest.raises(UnknownResourceTypeError, match="none"):
        group_jobspecs(group, ResourceGraph())


# -- serialisation --------------------------------------------------------------


def test_jobspecs_serialise_to_compact_json_that_round_trips(small_graph: ResourceGraph) -> None:
    group = Group(
        "g", (PodRequest("a", cores=2, memory_mib=100, virtual={"qpu": 1}, requires={"x": "y"}),)
    )
    for spec in group_jobspecs(group, small_graph):
        text = spec.to_json()
        assert " " not in text
        assert json.loads(text) == spec.jobspec


def test_jobspecs_are_canonical_fluxion_v1() -> None:
    for jobspec in (compute_jobspec([PodRequest("a", cores=2, gpus=1, memory_mib=8)]),
                    virtual_jobspec("qpu", 2, {"provider": "braket"})):
        assert set(jobspec) == {"version", "resources", "tasks", "attributes"}
        assert all(
            r["type"] == "slot" and r["label"] and r["count"] >= 1 for r in jobspec["resources"]
        )
        assert all(isinstance(r["count"], int) and r["count"] >= 1
                   for slot in jobspec["resources"] for r in slot["with"])


# -- one compute jobspec per pod shape (Fluxion forbids sibling slots) ----------


def test_each_pod_shape_gets_its_own_compute_jobspec_named_compute_n(
    small_graph: ResourceGraph,
) -> None:
    group = Group(
        "g", (PodRequest("a", cores=2), PodRequest("b", cores=8), PodRequest("c", cores=2, gpus=1))
    )
    assert [s.kind for s in group_jobspecs(group, small_graph)] == [
        "compute",
        "compute-1",
        "compute-2",
    ]


def test_a_compute_jobspec_holds_a_single_slot_entry(small_graph: ResourceGraph) -> None:
    group = Group(
        "g", (PodRequest("a", cores=2), PodRequest("b", cores=8), PodRequest("c", cores=8))
    )
    for spec in group_jobspecs(group, small_graph):
        assert len(spec.jobspec["resources"]) == 1


def test_identical_pods_share_a_slot_entry_even_when_not_adjacent(
    small_graph: ResourceGraph,
) -> None:
    group = Group(
        "g", (PodRequest("a", cores=2), PodRequest("b", cores=8), PodRequest("c", cores=2))
    )
    assert [(s["count"], inner(s)["core"]["count"]) for s in compute_slots(group, small_graph)] == [
        (2, 2), (1, 8),
    ]


def test_a_compute_jobspec_refuses_pods_of_different_shapes() -> None:
    with pytest.raises(ValueError, match="one shape"):
        compute_jobspec([PodRequest("a", cores=1), PodRequest("b", cores=2)])


def test_every_compute_jobspec_of_a_group_carries_the_exclusion(small_graph: ResourceGraph) -> None:
    group = Group("g", (PodRequest("a", cores=2), PodRequest("b", cores=4)))
    for spec in group_jobspecs(group, small_graph, exclude_nodes=["node0"]):
        assert {"not": [{"hostlist": ["node0"]}]} in spec.jobspec["attributes"]["system"][
            "constraints"
        ]["and"]


def test_a_node_selector_becomes_a_hostlist_of_matching_nodes() -> None:
    from fluence_core.graph import ResourceGraph
    from fluence_core.matcher.jobspec import group_jobspecs
    from fluence_core.models import Group, NodeInfo, PodRequest

    graph = ResourceGraph([NodeInfo("a", 4, 4096, labels={"pool": "x"}), NodeInfo("b", 4, 4096)])
    picky = PodRequest("p", cores=1, node_selector=(("pool", "x"),))
    plain = PodRequest("q", cores=1)
    specs = group_jobspecs(Group("g", (picky, plain)), graph)
    constraints = [s.jobspec["attributes"]["system"]["constraints"] for s in specs]
    assert {"hostlist": ["a"]} in constraints[0]["and"]
    assert constraints[1] == {"properties": ["virtual=false"]}
