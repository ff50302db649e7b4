"""fluence_core.models: Nodes and Pods read from Kubernetes dicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fluence_core.models import Group, NodeInfo, PodRequest, Taint
from fluence_core.testing import make_pod_dict

# -- NodeInfo -------------------------------------------------------------------


def test_node_reads_allocatable_cpu_memory_and_gpus(
    make_node: Callable[..., dict[str, Any]],
) -> None:
    info = NodeInfo.from_kube(make_node("n0", cpu="16", memory="64Gi", gpus=2))
    assert (info.name, info.cores, info.memory_mib, info.gpus) == ("n0", 16, 65536, 2)


def test_node_cores_round_down_to_whole_cores(make_node: Callable[..., dict[str, Any]]) -> None:
    assert NodeInfo.from_kube(make_node("n0", cpu="15500m")).cores == 15


def test_node_falls_back_to_capacity_without_allocatable() -> None:
    node = {"metadata": {"name": "n0"}, "status": {"capacity": {"cpu": "4", "memory": "1Gi"}}}
    assert (NodeInfo.from_kube(node).cores, NodeInfo.from_kube(node).memory_mib) == (4, 1024)


def test_node_keeps_labels_and_taints(make_node: Callable[..., dict[str, Any]]) -> None:
    info = NodeInfo.from_kube(make_node(
        "n0", labels={"topology.kubernetes.io/zone": "a"},
        taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}],
    ))
    assert info.labels == {"topology.kubernetes.io/zone": "a"}
    assert info.taints == (Taint("k", "v", "PreferNoSchedule"),)


def test_node_without_a_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="metadata.name"):
        NodeInfo.from_kube({"metadata": {}, "status": {"allocatable": {"cpu": "1"}}})


def test_node_with_a_bad_quantity_is_an_error_naming_the_node(
    make_node: Callable[..., dict[str, Any]],
) -> None:
    with pytest.raises(ValueError, match="node n7"):
        NodeInfo.from_kube(make_node("n7", memory="lots"))


@pytest.mark.parametrize(("cpu", "match"), [("-4", "node n7: quantity '-4' is negative"),
                                            ("70000", "node n7: cpu 70000 is more than"),
                                            ("1e18", "node n7: quantity '1e18' is too large")])
def test_node_cpu_outside_the_bounds_is_an_error_naming_node_and_bound(
        make_node: Callable[..., dict[str, Any]], cpu: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NodeInfo.from_kube(make_node("n7", cpu=cpu))


def test_pod_requests_adding_up_past_int64_milli_units_are_an_error() -> None:
    huge = "9000000000000000"
    pod = make_pod_dict("p", cpu=huge, more_containers=[
        {"name": "two", "resources": {"requests": {"cpu": huge}}}])
    with pytest.raises(ValueError, match="pod default/p: cpu requests add up to more than"):
        PodRequest.from_kube(pod)


def test_a_plain_node_is_schedulable(make_node: Callable[..., dict[str, Any]]) -> None:
    assert NodeInfo.from_kube(make_node("n0")).schedulable


def test_a_cordoned_node_is_not_schedulable(make_node: Callable[..., dict[str, Any]]) -> None:
    assert not NodeInfo.from_kube(make_node("n0", unschedulable=True)).schedulable


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_a_node_with_a_blocking_taint_is_not_schedulable(
    make_node: Callable[..., dict[str, Any]], effect: str
) -> None:
    node = make_node("n0", taints=[{"key": "dedicated", "value": "infra", "effect": effect}])
    assert not NodeInfo.from_kube(node).schedulable


def test_a_prefer_no_schedule_taint_keeps_a_node_schedulable(
    make_node: Callable[..., dict[str, Any]],
) -> None:
    node = make_node("n0", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    assert NodeInfo.from_kube(node).schedulable


# -- PodRequest -----------------------------------------------------------------


@pytest.mark.parametrize(("cpu", "cores", "millicores", "shared"), [
    ("1", 1, 1000, False), ("4", 4, 4000, False), ("4000m", 4, 4000, False),
    ("500m", 0, 500, True), ("1500m", 0, 1500, True), ("2.1", 0, 2100, True), ("1m", 0, 1, True),
])
def test_whole_cpus_are_exclusive_cores_and_fractions_draw_millicores_from_the_pool(
        cpu: str, cores: int, millicores: int, shared: bool) -> None:
    request = PodRequest.from_kube(make_pod_dict("p", cpu=cpu))
    assert (request.cores, request.millicores, request.shared) == (cores, millicores, shared)


def test_a_pod_with_no_requests_shares_the_pool_asking_nothing() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app"}]}}
    request = PodRequest.from_kube(pod)
    assert (request.cores, request.millicores, request.shared) == (0, 0, True)


def test_a_pod_with_gpus_holds_whole_cores_even_for_a_fraction() -> None:
    request = PodRequest.from_kube(make_pod_dict("p", cpu="500m", extra={"nvidia.com/gpu": "1"}))
    assert (request.cores, request.shared) == (1, False)


def test_a_request_made_in_code_is_whole_cores() -> None:
    assert not PodRequest("p", cores=2).shared


@pytest.mark.parametrize(("memory", "mib"), [("4Gi", 4096), ("512Mi", 512), ("1G", 954), ("1", 1)])
def test_pod_memory_is_in_mib_rounded_up(memory: str, mib: int) -> None:
    assert PodRequest.from_kube(make_pod_dict("p", memory=memory)).memory_mib == mib


def test_pod_gpus_are_read_from_nvidia_com_gpu() -> None:
    assert PodRequest.from_kube(make_pod_dict("p", extra={"nvidia.com/gpu": "2"})).gpus == 2


def test_pod_requests_sum_over_containers() -> None:
    pod = make_pod_dict("p", cpu="1", memory="1Gi", more_containers=[
        {"name": "side", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}])
    request = PodRequest.from_kube(pod)
    assert (request.millicores, request.memory_mib) == (1500, 1536)


def test_limits_count_when_a_request_is_absent() -> None:
    pod = make_pod_dict("p", cpu="2", limits={"cpu": "3", "memory": "2Gi"})
    request = PodRequest.from_kube(pod)
    assert (request.cores, request.memory_mib) == (2, 2048)


def test_an_init_container_larger_than_the_app_containers_sets_the_request() -> None:
    pod = make_pod_dict("p", cpu="1", memory="1Gi", init=[{"cpu": "4"}])
    request = PodRequest.from_kube(pod)
    assert (request.cores, request.memory_mib) == (4, 1024)


def test_virtual_types_come_from_fluxion_extended_resources() -> None:
    pod = make_pod_dict(
        "p", extra={"fluxion.flux-framework.org/qpu": "1", "fluxion.flux-framework.org/qubit": "4"}
    )
    assert PodRequest.from_kube(pod).virtual == {"qpu": 1, "qubit": 4}


def test_a_virtual_type_asked_only_in_limits_counts() -> None:
    pod = make_pod_dict("p", cpu=None, limits={"fluxion.flux-framework.org/qpu": "1"})
    assert PodRequest.from_kube(pod).virtual == {"qpu": 1}


def test_require_annotations_become_pins_without_the_prefix() -> None:
    pod = make_pod_dict("p", annotations={
        "fluence.flux-framework.org/require-provider": "braket",
        "fluence.flux-framework.org/group-size": "3",
    })
    assert PodRequest.from_kube(pod).requires == {"provider": "braket"}


def test_pod_namespace_defaults_and_key_is_namespace_slash_name() -> None:
    assert PodRequest.from_kube(make_pod_dict("p", namespace=None)).key == "default/p"
    assert PodRequest.from_kube(make_pod_dict("q", namespace="hpc")).key == "hpc/q"


def test_a_bad_quantity_is_an_error_naming_the_pod_and_the_fields_path() -> None:
    path = r"spec\.containers\[0\]\.resources\.requests\.memory"
    with pytest.raises(ValueError, match=r"pod default/p: " + path):
        PodRequest.from_kube(make_pod_dict("p", memory="lots"))


# -- Group ----------------------------------------------------------------------


def test_group_virtual_types_are_in_first_seen_order_without_repeats() -> None:
    group = Group("g", (
        PodRequest("a", virtual={"qubit": 2}),
        PodRequest("b"),
        PodRequest("c", virtual={"qpu": 1, "qubit": 1}),
    ))
    assert group.virtual_types == ["qubit", "qpu"]


def test_pod_overhead_counts_toward_the_request() -> None:
    pod = make_pod_dict("p", cpu="900m", memory="1Gi", overhead={"cpu": "100m", "memory": "64Mi"})
    request = PodRequest.from_kube(pod)
    assert (request.cores, request.millicores, request.memory_mib) == (1, 1000, 1088)
