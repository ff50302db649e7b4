"""A lone pod whose filters read the placed pods stops its search at enough feasible nodes.

kube-scheduler's percentageOfNodesToScore: from where the last search stopped, until
``nodes_to_find`` nodes are feasible. The graph counts CPU itself, so a search whose
nodes have no room is widened to every node before the pod waits.
"""

from __future__ import annotations

from typing import Any, Callable

from fluence_core.feasibility.run import default_filters
from fluence_core.models import Group, PodRequest
from fluence_core.scheduler.feasible import FeasibleNodes
from fluence_core.testing import make_pod_dict
from tests.scheduler.conftest import Harness, node, pod
from tests.scheduler.parts import cluster_of, started_view

Factory = Callable[..., Harness]
HOSTNAME = "kubernetes.io/hostname"
NODES = 150
"""More than kube-scheduler's 100: a search stops at 100 feasible nodes (49 % is 73)."""


def _labelled(name: str, cpu: int = 4) -> dict[str, Any]:
    """A node of at most 110 pods, labelled with its hostname as the kubelet does."""
    return node(name, cpu, pods="110", hostname=True)


def _apart(name: str, cpu: str = "100m", group: str | None = None) -> dict[str, Any]:
    """A pod that keeps off any node holding a pod labelled ``color: green``."""
    term = {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": HOSTNAME}
    return make_pod_dict(name, cpu, labels={"color": "green"}, group=group, affinity={
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})


def _allowed(feasible_nodes: FeasibleNodes, *objects: dict[str, Any]) -> list[frozenset[str]]:
    group = Group("g", tuple(PodRequest.from_kube(o) for o in objects))
    asked = feasible_nodes.constrain(group, list(objects))
    assert not isinstance(asked, str), asked
    return [p.allowed or frozenset() for p in asked.pods]


def _names(numbers: range | list[int]) -> frozenset[str]:
    return frozenset(f"n{i:03d}" for i in numbers)


def test_each_lone_search_starts_where_the_last_one_stopped() -> None:
    view = started_view(cluster_of(*(_labelled(f"n{i:03d}") for i in range(NODES))))
    feasible_nodes = FeasibleNodes(view, default_filters(), set)
    feasible_nodes.begin()
    order = [n.name for n in feasible_nodes.snapshot().nodes]
    [first] = _allowed(feasible_nodes, _apart("a"))
    assert first == frozenset(order[:100]) and feasible_nodes.partial
    [second] = _allowed(feasible_nodes, _apart("b"))
    assert second == frozenset(order[100:] + order[:50])


def test_a_gangs_pods_are_asked_of_every_node() -> None:
    view = started_view(cluster_of(*(_labelled(f"n{i:03d}") for i in range(NODES))))
    feasible_nodes = FeasibleNodes(view, default_filters(), set)
    feasible_nodes.begin()
    allowed = _allowed(feasible_nodes, _apart("a", group="g"), _apart("b", group="g"))
    assert allowed == [_names(range(NODES))] * 2 and not feasible_nodes.partial


def test_a_percentage_of_100_asks_every_node() -> None:
    view = started_view(cluster_of(*(_labelled(f"n{i:03d}") for i in range(NODES))))
    feasible_nodes = FeasibleNodes(view, default_filters(), set, percentage=100)
    feasible_nodes.begin()
    assert _allowed(feasible_nodes, _apart("a")) == [_names(range(NODES))]


def test_lone_pods_apart_spread_over_the_nodes_as_the_searches_rotate(
        harness_factory: Factory) -> None:
    h = harness_factory(*(_labelled(f"n{i:03d}") for i in range(NODES)),
                        *(_apart(f"p{i}") for i in range(120)))
    h.cycle()
    placed = [h.node_of(f"p{i}") for i in range(120)]
    assert None not in placed and len(set(placed)) == 120


def test_a_search_whose_nodes_have_no_room_is_widened_before_the_pod_waits(
        harness_factory: Factory) -> None:
    # the first 100 nodes are full: the filters (which leave CPU to the graph) find them
    # feasible, the graph has no room on them, and the pod goes to a node past them
    full = [pod(f"filler{i}", "1", node_name=f"n{i:03d}", scheduler="other") for i in range(100)]
    h = harness_factory(*(_labelled(f"n{i:03d}", cpu=1) for i in range(NODES)), *full,
                        _apart("late", cpu="1"))
    h.cycle()
    assert h.node_of("late") in _names(range(100, NODES))


