"""fluence_core.pod_requests: a pod's size by kube-scheduler's rule, and nowhere else.

The expected numbers follow kube-scheduler's ``PodRequests`` (component-helpers):
app containers summed, sidecars added in full, a classic init container as a
running maximum with the sidecars started before it, pod-level requests over the
container sums for cpu, memory and hugepages, then the RuntimeClass's overhead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fluence_core.models import PodRequest
from fluence_core.pod_requests import pod_requests
from fluence_core.quantity import QuantityError
from fluence_core.testing import make_pod_dict

GIB = 2**30
MIB = 2**20
ROOT = Path(__file__).resolve().parents[1]


def _c(name: str, restart: str | None = None, limits: dict[str, str] | None = None,
       **requests: str) -> dict[str, Any]:
    """A container requesting ``requests`` (``restart="Always"``: a native sidecar)."""
    resources: dict[str, Any] = {"requests": dict(requests)}
    if limits:
        resources["limits"] = limits
    body: dict[str, Any] = {"name": name, "resources": resources}
    if restart:
        body["restartPolicy"] = restart
    return body


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
         **spec: Any) -> dict[str, Any]:
    """Pod ``ns/p`` of exactly these containers and init containers, in this order."""
    return make_pod_dict("p", namespace="ns", containers=containers,
                         **({} if init is None else {"initContainers": init}), **spec)


# -- app containers ------------------------------------------------------------------------


def test_app_containers_are_summed_per_resource() -> None:
    pod = _pod([_c("a", cpu="100m", memory="1Gi"), _c("b", cpu="1500m", memory="512Mi")])
    assert pod_requests(pod) == {"cpu": 1600, "memory": GIB + 512 * MIB}


def test_a_limit_stands_in_for_an_absent_request_as_the_api_server_defaults_it() -> None:
    pod = _pod([_c("a", limits={"cpu": "2", "memory": "1Gi"}, memory="256Mi")])
    assert pod_requests(pod) == {"cpu": 2000, "memory": 256 * MIB}


def test_amounts_are_summed_exactly_and_rounded_up_once() -> None:
    pod = _pod([_c("a", cpu="500u"), _c("b", cpu="500u")])
    assert pod_requests(pod) == {"cpu": 1}  # 0.5m + 0.5m is 1m, not 2


def test_memory_and_extended_resources_are_counted_in_units() -> None:
    pod = _pod([_c("a", memory="1G", **{"example.com/fpga": "2", "hugepages-2Mi": "4Mi",
                                        "ephemeral-storage": "1Gi"}),
                _c("b", **{"example.com/fpga": "1"})])
    assert pod_requests(pod) == {"memory": 10**9, "example.com/fpga": 3,
                                 "hugepages-2Mi": 4 * MIB, "ephemeral-storage": GIB}


def test_a_pod_asking_nothing_asks_for_nothing() -> None:
    assert pod_requests(_pod([{"name": "a"}])) == {}


# -- init containers and sidecars ----------------------------------------------------------


def test_a_classic_init_container_larger_than_the_app_sets_the_floor() -> None:
    pod = _pod([_c("app", cpu="1", memory="1Gi")], [_c("init", cpu="4", memory="64Mi")])
    assert pod_requests(pod) == {"cpu": 4000, "memory": GIB}


def test_a_sidecar_adds_to_the_app_containers_in_full() -> None:
    pod = _pod([_c("app", cpu="2")], [_c("side", "Always", cpu="2")])
    assert pod_requests(pod) == {"cpu": 4000}


def test_a_sidecar_started_before_a_large_init_container_runs_beside_it() -> None:
    pod = _pod([_c("app", cpu="1")], [_c("side", "Always", cpu="1"), _c("init", cpu="4")])
    assert pod_requests(pod) == {"cpu": 5000}  # init 4 + the sidecar already running 1


def test_a_sidecar_started_after_a_large_init_container_does_not_run_beside_it() -> None:
    pod = _pod([_c("app", cpu="1")], [_c("init", cpu="4"), _c("side", "Always", cpu="1")])
    assert pod_requests(pod) == {"cpu": 4000}  # max(init 4, app 1 + sidecar 1)


def test_restartable_init_containers_among_classic_ones_count_only_from_where_they_start() -> None:
    pod = _pod([_c("app", cpu="500m")], [
        _c("init-a", cpu="2"),                 # alone: 2
        _c("side-1", "Always", cpu="1"),       # 1
        _c("init-b", cpu="2"),                 # 2 + side-1: 3
        _c("side-2", "Always", cpu="250m"),    # 1.25
        _c("init-c", cpu="1", memory="1Gi"),   # 1 + 1.25 = 2.25
    ])
    assert pod_requests(pod) == {"cpu": 3000, "memory": GIB}


def test_sidecars_and_app_containers_beat_the_init_peak_when_larger() -> None:
    pod = _pod([_c("app", cpu="3")], [_c("side", "Always", cpu="1"), _c("init", cpu="2")])
    assert pod_requests(pod) == {"cpu": 4000}


def test_an_init_container_with_another_restart_policy_is_classic() -> None:
    pod = _pod([_c("app", cpu="1")], [_c("init", "OnFailure", cpu="1")])
    assert pod_requests(pod) == {"cpu": 1000}


def test_memory_and_extended_resources_follow_the_same_init_rule() -> None:
    pod = _pod([_c("app", memory="1Gi", **{"example.com/fpga": "1"})],
               [_c("side", "Always", memory="1Gi"),
                _c("init", memory="2Gi", **{"example.com/fpga": "2"})])
    assert pod_requests(pod) == {"memory": 3 * GIB, "example.com/fpga": 2}


# -- pod-level requests --------------------------------------------------------------------


def test_pod_level_requests_override_the_container_sums_for_what_they_name() -> None:
    pod = _pod([_c("app", cpu="1", memory="1Gi")], resources={"requests": {"cpu": "3"}})
    assert pod_requests(pod) == {"cpu": 3000, "memory": GIB}


def test_pod_level_requests_size_a_pod_whose_containers_request_nothing() -> None:
    pod = _pod([{"name": "a"}, {"name": "b"}],
               resources={"requests": {"cpu": "6", "memory": "2Gi"}})
    assert pod_requests(pod) == {"cpu": 6000, "memory": 2 * GIB}


def test_pod_level_requests_override_the_init_and_sidecar_peak() -> None:
    pod = _pod([_c("app", cpu="1")], [_c("side", "Always", cpu="1"), _c("init", cpu="2")],
               resources={"requests": {"cpu": "4"}})
    assert pod_requests(pod) == {"cpu": 4000}


def test_pod_level_hugepages_count_but_other_resources_are_not_pod_level() -> None:
    pod = _pod([_c("app", **{"example.com/fpga": "1"})],
               resources={"requests": {"hugepages-2Mi": "8Mi", "example.com/fpga": "5"}})
    assert pod_requests(pod) == {"hugepages-2Mi": 8 * MIB, "example.com/fpga": 1}


def test_a_pod_level_limit_stands_in_when_no_container_names_the_resource() -> None:
    pod = _pod([{"name": "a"}], resources={"limits": {"cpu": "2", "memory": "1Gi"}})
    assert pod_requests(pod) == {"cpu": 2000, "memory": GIB}


def test_a_pod_level_limit_leaves_the_container_sum_when_containers_name_the_resource() -> None:
    pod = _pod([_c("a", cpu="500m")], resources={"limits": {"cpu": "2"}})
    assert pod_requests(pod) == {"cpu": 500}


# -- overhead ------------------------------------------------------------------------------


def test_overhead_is_added_to_the_containers() -> None:
    pod = _pod([_c("app", cpu="1", memory="1Gi")], overhead={"cpu": "250m", "memory": "64Mi"})
    assert pod_requests(pod) == {"cpu": 1250, "memory": GIB + 64 * MIB}


def test_overhead_is_added_on_top_of_pod_level_requests() -> None:
    pod = _pod([{"name": "a"}], resources={"requests": {"cpu": "2"}}, overhead={"cpu": "500m"})
    assert pod_requests(pod) == {"cpu": 2500}


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "path"), [
    ({"containers": [_c("a", cpu="lots")]}, r"spec\.containers\[0\]\.resources\.requests\.cpu"),
    ({"containers": [], "initContainers": [_c("i", limits={"memory": "-1"})]},
     r"spec\.initContainers\[0\]\.resources\.limits\.memory"),
    ({"containers": [], "resources": {"requests": {"cpu": "x"}}},
     r"spec\.resources\.requests\.cpu"),
    ({"containers": [], "overhead": {"cpu": "?"}}, r"spec\.overhead\.cpu"),
    ({"containers": {"a": 1}}, r"spec\.containers is not a list"),
    ({"containers": ["a"]}, r"spec\.containers\[0\] is not an object"),
    ({"containers": [{"name": "a", "resources": {"requests": ["cpu"]}}]},
     r"spec\.containers\[0\]\.resources\.requests is not an object"),
])
def test_a_bad_field_is_an_error_naming_the_pod_and_its_path(spec: dict[str, Any],
                                                             path: str) -> None:
    with pytest.raises(ValueError, match=r"pod ns/p: " + path):
        pod_requests({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})


def test_totals_past_int64_milli_units_are_an_error() -> None:
    pod = _pod([_c("a", cpu="9000000000000000"), _c("b", cpu="9000000000000000")])
    with pytest.raises(QuantityError, match="pod ns/p: cpu requests add up to more than"):
        pod_requests(pod)


# -- the graph's view: whole cores or the shared pool --------------------------------------


@pytest.mark.parametrize(("pod", "cores", "millicores"), [
    (_pod([_c("app", cpu="2")], [_c("side", "Always", cpu="2")]), 4, 4000),
    (_pod([_c("app", cpu="2")], [_c("side", "Always", cpu="500m")]), 0, 2500),
    (_pod([{"name": "a"}], resources={"requests": {"cpu": "3"}}), 3, 3000),
    (_pod([_c("app", cpu="2")], overhead={"cpu": "250m"}), 0, 2250),
    (_pod([_c("app", cpu="1")], [_c("init", cpu="4")]), 4, 4000),
])
def test_the_graph_charges_the_pods_total_whole_cores_or_pool_by_that_total(
        pod: dict[str, Any], cores: int, millicores: int) -> None:
    request = PodRequest.from_kube(pod)
    assert (request.cores, request.millicores) == (cores, millicores)


# -- nobody else computes a pod's size -----------------------------------------------------

READS_CONTAINERS_FOR_OTHER_REASONS = {
    "fluence_core/kube/downward.py": "finds the container an env variable belongs to",
    "fluence_core/kube/fake.py": "drops container images from what the fake stores",
    "fluence_core/feasibility/facts.py": "reads host ports (NodePorts)",
    "fluence_core/sim/jobs.py": "builds the simulator's pods",
    "fluence_core/sim/kubelet.py": "finds the scout's sidecar in a simulated pod",
    "fluence_core/testing.py": "builds test pods",
    "fluence_core/testing_apiserver.py": "builds the pod that probes whether a webhook is called",
    "fluence_core/hybrid/credentials.py": "hands the submitting container's env to the sidecar",
    "fluence_core/webhook/cel.py": "a CEL condition: does a container name a virtual type",
    "fluence_core/webhook/admission/handlers/fluxion_env.py":
        "adds env variables to the containers",
    "fluence_core/webhook/pod_shape.py": "checks a review's shape",
    "fluence_core/webhook/pod_fields.py": "which virtual types a pod's containers name",
    "fluence_core/hybrid/split.py": "moves virtual requests to the scout, adds the sidecar",
    "fluence_core/hybrid/endpoint.py": "checks the scout carries Fluence's sidecar",
    "fluence_core/hybrid/orphans.py": "looks for a live pod of the Job running the sidecar",
    "plugins/fluence-admission/fluence_admission/control.py":
        "leaves Fluence's own containers out before asking pod_requests",
    "plugins/fluence-flux/fluence_flux/handler.py": "adds Flux's init container and its mounts",
    "plugins/fluence-flux/fluence_flux/workload.py": "reads a workload's command",
}
"""Modules that read a pod's container lists, and why: none of them may size a pod."""

PARSES_QUANTITIES_FOR_OTHER_REASONS = {
    "fluence_core/models.py": "a Node's allocatable",
    "fluence_core/numa.py": "a NodeResourceTopology zone's allocatable CPUs, GPUs, memory",
    "fluence_core/feasibility/resources.py": "a Node's allocatable and volume sizes",
    "fluence_core/feasibility/facts.py": "a Node's allocatable (NodeFacts)",
    "fluence_core/sim/baseline.py": "a Node's allocatable",
    "fluence_core/sim/scenario.py": "validates the scenario's quantities",
    "fluence_core/dra/cel.py": "a CEL selector's quantity() over a device's capacity",
    "fluence_core/dra/devices.py": "a ResourceSlice device's capacity",
}
"""Modules that parse Kubernetes quantities, and what: none of them a pod's requests."""

THE_ONE = "fluence_core/pod_requests.py"
_CONTAINER_LISTS = re.compile(r"""["'](containers|initContainers|overhead)["']|\bcontainers\(""")
"""The container lists named as keys, or through ``webhook.pod_fields.containers(pod)``."""
_QUANTITY_PARSERS = re.compile(
    r"\b(cpu_cores|memory_mib|parse_quantity|read_amounts)\("
    r"|from fluence_core\.quantity import [^\n]*\b(cpu_cores|memory_mib|parse_quantity)\b")
"""A parser called, or imported to be called by another name (``parse = memory_mib if ...``)."""


def _shipped_modules() -> list[str]:
    found = [p for p in (ROOT / "fluence_core").rglob("*.py")]
    for package in (ROOT / "plugins").glob("*/*/"):
        if package.name != "tests" and (package / "__init__.py").exists():
            found += package.rglob("*.py")
    return sorted(str(p.relative_to(ROOT)) for p in found
                  if "_pb2" not in p.name and p.name != "quantity.py")


def _reading(pattern: re.Pattern[str]) -> set[str]:
    return {m for m in _shipped_modules() if pattern.search((ROOT / m).read_text())}


def test_only_the_one_module_and_the_listed_ones_read_a_pods_containers() -> None:
    unlisted = _reading(_CONTAINER_LISTS) - set(READS_CONTAINERS_FOR_OTHER_REASONS) - {THE_ONE}
    assert not unlisted, (
        f"{sorted(unlisted)} read a pod's containers: size a pod with "
        f"fluence_core.pod_requests.pod_requests, or list the module and its reason here")


def test_only_the_listed_modules_parse_quantities() -> None:
    unlisted = _reading(_QUANTITY_PARSERS) - set(PARSES_QUANTITIES_FOR_OTHER_REASONS) - {THE_ONE}
    assert not unlisted, (
        f"{sorted(unlisted)} parse quantities: a pod's size is "
        f"fluence_core.pod_requests.pod_requests; list any other reason here")


def test_the_allow_lists_name_modules_that_still_need_to_be_there() -> None:
    stale = (set(READS_CONTAINERS_FOR_OTHER_REASONS) - _reading(_CONTAINER_LISTS)) | (
        set(PARSES_QUANTITIES_FOR_OTHER_REASONS) - _reading(_QUANTITY_PARSERS))
    assert not stale, f"{sorted(stale)} no longer read containers or quantities: drop them"


def test_the_guard_sees_a_parser_imported_and_called_under_another_name() -> None:
    module = ("from fluence_core.quantity import cpu_cores, memory_mib\n"
              "parse = memory_mib if kind == 'memory' else cpu_cores\n")
    assert _QUANTITY_PARSERS.search(module)
    assert not _QUANTITY_PARSERS.search("share.memory_mib + request.memory_mib")


def test_the_guard_sees_a_module_that_sums_container_requests() -> None:
    sizer = 'sum(c["resources"]["requests"]["cpu"] for c in pod["spec"]["containers"])'
    assert _CONTAINER_LISTS.search(sizer)
