"""The graph charges a pod what kube-scheduler charges it: no shape overbooks a node.

Each case is one of issue 27's reproductions: a native sidecar, pod-level requests,
a foreign pod sized at pod level, the RuntimeClass's overhead. Before the one rule
(:mod:`fluence_core.pod_requests`) each of them put more on a node than it has.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from fluence_core.kube.api import PODS
from fluence_core.pod_requests import pod_requests
from fluence_core.sim.baseline import DEFAULT_SCHEDULER, FirstFitScheduler
from tests.scheduler.conftest import Harness, node, pod


def _cpu_on(h: Harness, node_name: str) -> int:
    """Millicores the pods bound to ``node_name`` request, by kube-scheduler's rule."""
    return sum(pod_requests(p).get("cpu", 0) for p in h.cluster.list(PODS).items
               if p["spec"].get("nodeName") == node_name)


def test_a_pod_with_a_sidecar_is_not_bound_to_a_node_too_small_for_both(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=3), pod("p", "2", sidecars=[{"cpu": "2"}]))
    h.cycle()
    assert h.node_of("p") is None  # 2 + 2 is 4 cpu; kube-scheduler refuses it too


@pytest.mark.parametrize(("first", "next_cpu", "held"), [
    pytest.param(pod("first", "2", sidecars=[{"cpu": "2"}]), "1", 4000, id="app-and-sidecar"),
    pytest.param(pod("first", None, pod_requests={"cpu": "3"}), "2", 3000, id="pod-level"),
])
def test_a_pod_holds_its_whole_size_so_the_next_pod_waits(
    harness_factory: Callable[..., Harness], first: dict[str, Any], next_cpu: str, held: int,
) -> None:
    h = harness_factory(node("n0", cpu=4), first)
    h.cycle()
    assert h.node_of("first") == "n0"
    h.add(pod("next", next_cpu))  # fits beside what the pod's containers alone ask
    h.cycle()
    assert h.node_of("next") is None
    assert _cpu_on(h, "n0") == held


def test_a_foreign_pod_sized_at_pod_level_is_subtracted_in_full(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=8),
                        pod("theirs", None, pod_requests={"cpu": "6"},
                            scheduler="default-scheduler", node_name="n0"),
                        *(pod(f"w{i}", "2") for i in range(4)))
    h.cycle()
    assert [h.node_of(f"w{i}") for i in range(4)].count("n0") == 1
    assert _cpu_on(h, "n0") == 8000  # 6 + 2, not 6 + 4 x 2


def test_the_runtime_classs_overhead_is_charged_with_the_pod(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=2), pod("heavy", "2", overhead={"cpu": "500m"}))
    h.cycle()
    assert h.node_of("heavy") is None  # 2.5 cpu on a 2-cpu node


def test_the_simulators_baseline_sizes_pods_by_the_same_rule(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=3),
                        pod("side", "2", sidecars=[{"cpu": "2"}], scheduler=DEFAULT_SCHEDULER),
                        pod("small", None, pod_requests={"cpu": "3"},
                            scheduler=DEFAULT_SCHEDULER))
    baseline = FirstFitScheduler(h.cluster, clock=lambda: 0.0)
    baseline.start()
    assert baseline.schedule_once() == {"default/small": "n0"}


def test_a_node_overcommitted_by_a_foreign_pod_takes_no_more_pods(
    harness_factory: Callable[..., Harness],
) -> None:
    # bound by name past its node's 4 cpu: kube-scheduler sees the node full
    h = harness_factory(node("n0", cpu=4),
                        pod("theirs", "6", scheduler="default-scheduler", node_name="n0"),
                        pod("whole", "1"), pod("share", "500m"))
    h.cycle()
    assert (h.node_of("whole"), h.node_of("share")) == (None, None)


def test_an_overcommitted_nodes_room_comes_back_when_the_foreign_pod_goes(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=4),
                        pod("theirs", "6", scheduler="default-scheduler", node_name="n0"))
    h.cycle()
    h.cluster.delete(PODS, "theirs", "default")
    h.add(pod("whole", "4"))
    h.cycle()
    assert h.node_of("whole") == "n0"


def test_a_node_overcommitted_in_memory_takes_no_pod_asking_memory(
    harness_factory: Callable[..., Harness],
) -> None:
    h = harness_factory(node("n0", cpu=4, memory="4Gi"),
                        pod("theirs", "1", scheduler="default-scheduler", node_name="n0",
                            requests={"memory": "8Gi"}),
                        pod("mine", "1", requests={"memory": "256Mi"}))
    h.cycle()
    assert h.node_of("mine") is None


def test_a_foreign_pod_that_fits_in_part_leaves_the_rest_of_the_node_to_others(
    harness_factory: Callable[..., Harness],
) -> None:
    # 3 of 4 cpu by a pod already there, then one asking 3 more bound by name: the node
    # holds 6 of 4; the first pod is held in full, the second for the 1 cpu left
    h = harness_factory(node("n0", cpu=4), node("n1", cpu=4),
                        pod("first", "3", scheduler="default-scheduler", node_name="n0"),
                        pod("second", "3", scheduler="default-scheduler", node_name="n0"),
                        pod("mine", "1"))
    h.cycle()
    assert h.node_of("mine") == "n1"  # not n0, though partly used nodes are filled first
