"""fluence_core.scheduler.view: the caches, the graph kept in step, pins and releases."""

from __future__ import annotations

import json

from fluence_core import names
from fluence_core.kube.api import DELETED, PODGROUPS, RESYNC
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Allocation
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.models import NodeInfo
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.records import HeldPlacement
from fluence_core.topology import Level
from tests.scheduler.conftest import node, pod, pod_group
from tests.scheduler.parts import cluster_of, started_view


def _hold(view_pods: list[str], allocation: Allocation, owner: str = "g") -> HeldPlacement:
    return HeldPlacement("podgroups", "default", owner, view_pods, {"compute": allocation})


def test_a_bound_pod_without_a_record_is_pinned_where_it_runs() -> None:
    view = started_view(cluster_of(node("n0"), pod("theirs", "3", scheduler="other",
                                                   node_name="n0")))
    pin = view.pins[("default", "theirs")]
    assert pin.node == "n0"
    held = view.matcher.allocations()[pin.jobid]
    assert sum(len(s.cores) for s in held.nodes) == 3


def test_a_pod_a_record_covers_is_not_pinned_again() -> None:
    record = {"pods": ["mine"], "allocations": {}}
    covered = pod("mine", node_name="n0",
                  annotations={names.ALLOCATION_ANNOTATION: json.dumps([record])})
    view = started_view(cluster_of(node("n0"), covered))
    assert view.pins == {}
    assert view.records.held[("pods", "default", "mine")][0].pods == ["mine"]


def test_a_pod_finishing_gives_its_pin_back_and_moves_the_generation() -> None:
    view = started_view(cluster_of(node("n0"), pod("theirs", scheduler="other", node_name="n0")))
    before = view.generation
    done = pod("theirs", scheduler="other", node_name="n0")
    done["status"] = {"phase": "Succeeded"}
    view.handle("pods", "MODIFIED", done)
    assert view.pins == {} and dict(view.matcher.allocations()) == {}
    assert view.generation > before


def test_pods_on_counts_bound_pods_and_assumed_bindings() -> None:
    view = started_view(cluster_of(node("n0"), pod("a", node_name="n0"), pod("b")))
    assert view.pods_on("n0") == 1
    view.assume(("default", "b"), "n0")
    assert view.pods_on("n0") == 2
    assert ("default", "b") not in view.unplaced


def test_a_binding_settled_after_the_watch_showed_it_counts_once() -> None:
    view = started_view(cluster_of(node("n0"), pod("b")))
    view.handle("pods", "MODIFIED", pod("b", node_name="n0"))
    view.assume(("default", "b"), "n0")
    assert view.pods_on("n0") == 1


def test_a_binding_settled_after_its_pod_went_does_not_count() -> None:
    view = started_view(cluster_of(node("n0"), pod("b")))
    view.handle("pods", "DELETED", pod("b"))
    view.assume(("default", "b"), "n0")
    assert view.pods_on("n0") == 0 and ("default", "b") not in view.unplaced


def test_a_binding_settled_after_its_pod_was_replaced_does_not_count() -> None:
    view = started_view(cluster_of(node("n0"), pod("b")))
    view.assume(("default", "b"), "n0", uid="the-uid-of-an-older-pod")
    assert view.pods_on("n0") == 0 and ("default", "b") in view.unplaced


def test_an_assumed_pod_is_not_unplaced_again_by_a_stale_event() -> None:
    view = started_view(cluster_of(node("n0"), pod("b")))
    view.assume(("default", "b"), "n0")
    view.handle("pods", "MODIFIED", pod("b"))
    assert ("default", "b") not in view.unplaced


def test_unbound_pods_are_the_unplaced_ones() -> None:
    view = started_view(cluster_of(node("n0"), pod("waiting"), pod("running", node_name="n0")))
    assert list(view.unplaced) == [("default", "waiting")]


def test_a_new_node_joins_the_graph_and_moves_the_generation() -> None:
    view = started_view(cluster_of(node("n0")))
    before = view.generation
    view.handle("nodes", "ADDED", node("n1", cpu=8))
    assert view.graph.has_node("n1") and view.graph.node("n1").cores == 8
    assert view.generation > before


def test_a_cordoned_node_stays_in_the_graph_marked_and_moves_the_generation() -> None:
    view = started_view(cluster_of(node("n0")))
    before = view.generation
    view.handle("nodes", "MODIFIED", node("n0", unschedulable=True))
    vertex = view.graph.node("n0")
    assert not vertex.schedulable and not vertex.down    # a tolerating pod may still go there
    assert view.generation > before
    view.handle("nodes", "MODIFIED", node("n0"))
    assert view.graph.node("n0").schedulable


def test_a_deleted_node_leaves_the_graph() -> None:
    view = started_view(cluster_of(node("n0"), node("n1")))
    view.handle("nodes", DELETED, node("n1"))
    assert not view.graph.has_node("n1") and "n1" not in view.nodes


def test_a_grown_node_keeps_what_it_held() -> None:
    view = started_view(cluster_of(node("n0", cpu=4), pod("theirs", "2", scheduler="other",
                                                          node_name="n0")))
    view.handle("nodes", "MODIFIED", node("n0", cpu=8))
    assert view.graph.node("n0").cores == 8
    pin = view.pins[("default", "theirs")]
    assert pin.jobid in view.matcher.allocations()


def test_a_record_is_released_and_rewritten_when_its_pods_all_finish() -> None:
    cluster = cluster_of(node("n0"), pod_group("g", 2), pod("a", group="g", node_name="n0"),
                         pod("b", group="g", node_name="n0"))
    view = started_view(cluster)
    allocation = view.matcher.allocations()[view.pins[("default", "a")].jobid]
    view.unpin(("default", "a"))
    view.unpin(("default", "b"))
    view.matcher.restore(allocation)
    view.records.held[("podgroups", "default", "g")] = [_hold(["a", "b"], allocation)]
    for name in ("a", "b"):
        done = pod(name, group="g", node_name="n0")
        done["status"] = {"phase": "Failed"}
        view.handle("pods", "MODIFIED", done)
        if name == "a":
            assert allocation.jobid in view.matcher.allocations(), "one member still runs"
    assert ("podgroups", "default", "g") not in view.records.held, "no empty entry left behind"
    assert dict(view.matcher.allocations()) == {}
    annotations = cluster.get(PODGROUPS, "g", "default")["metadata"].get("annotations") or {}
    assert names.ALLOCATION_ANNOTATION not in annotations


def test_deleting_a_pod_group_cancels_what_it_held() -> None:
    view = started_view(cluster_of(node("n0"), pod_group("g", 1), pod("a", "2", group="g",
                                                                      node_name="n0")))
    allocation = view.matcher.allocations()[view.pins[("default", "a")].jobid]
    view.pins.clear()
    view.records.held[("podgroups", "default", "g")] = [_hold(["a"], allocation)]
    view.handle("podgroups", DELETED, pod_group("g", 1))
    assert ("podgroups", "default", "g") not in view.records.held
    assert dict(view.matcher.allocations()) == {}


def test_a_resync_drops_what_the_listing_no_longer_has() -> None:
    view = started_view(cluster_of(node("n0"), pod("gone"), pod("kept")))
    view.handle("pods", RESYNC, {"items": [pod("kept")]})
    assert list(view.pods) == [("default", "kept")]
    assert list(view.unplaced) == [("default", "kept")]


def test_swap_re_holds_every_allocation_and_keeps_the_pins() -> None:
    view = started_view(cluster_of(node("n0"), pod("theirs", "2", scheduler="other",
                                                   node_name="n0")))
    held = dict(view.matcher.allocations())
    graph = ResourceGraph([NodeInfo.from_kube(node("n0"))])
    before = view.generation
    view.swap(graph, EmbeddedMatcher(graph))
    assert view.graph is graph
    assert dict(view.matcher.allocations()).keys() == held.keys()
    assert ("default", "theirs") in view.pins and view.generation > before


def test_utilisation_is_the_fraction_of_cores_held_when_scraped() -> None:
    view = started_view(cluster_of(node("n0", cpu=4), pod("theirs", "1", scheduler="other",
                                                          node_name="n0")))
    metrics = SchedulerMetrics()
    view.track_utilisation(metrics)
    value = metrics.registry.get_sample_value("fluence_graph_utilisation",
                                              {"resource": "cores"})
    assert value == 0.25
    view.handle("nodes", "ADDED", node("n1", cpu=4))
    value = metrics.registry.get_sample_value("fluence_graph_utilisation",
                                              {"resource": "cores"})
    assert value == 0.125


def test_handle_is_what_the_watch_feeds() -> None:
    view = started_view(cluster_of(node("n0")))
    view.handle("pods", "ADDED", pod("new"))
    assert ("default", "new") in view.pods and ("default", "new") in view.unplaced
    view.handle("pods", DELETED, pod("new"))
    assert ("default", "new") not in view.pods and ("default", "new") not in view.unplaced


def test_a_lone_pod_of_ours_is_held_from_its_binding_not_pinned() -> None:
    view = started_view(cluster_of(node("n0"), pod("mine", "3", node_name="n0")))
    assert view.pins == {}
    [record] = view.records.held[("pods", "default", "mine")]
    assert record.pods == ["mine"] and not record.durable
    assert sum(len(s.cores) for s in record.allocations["compute"].nodes) == 3


def _racked(name: str, rack: str) -> dict[str, object]:
    """A node of rack ``rack``."""
    return node(name, labels={names.RACK_LABEL: rack})


def test_a_relabelled_node_moves_to_its_new_rack_with_what_it_holds() -> None:
    rack = Level(names.RACK_LABEL, "rack")
    view = started_view(cluster_of(_racked("n0", "r1"), _racked("n1", "r1"),
                                   pod("theirs", "2", scheduler="other", node_name="n0")),
                        levels=(rack,))
    assert view.graph.node_path("n0") == "/cluster0/r1/n0"
    before = view.generation
    view.handle("nodes", "MODIFIED", _racked("n0", "r2"))
    assert view.graph.node_path("n0") == "/cluster0/r2/n0"
    assert view.graph.node("n0").labels == {names.RACK_LABEL: "r2"}
    pin = view.pins[("default", "theirs")]
    held = view.matcher.allocations()[pin.jobid]
    assert [s.node for s in held.nodes] == ["n0"], "what it held is held again"
    assert view.generation > before
    assert isinstance(view.matcher, EmbeddedMatcher)
    assert view.matcher.domain_free(0) == {("r1",): (4, 0), ("r2",): (2, 0)}


def test_a_kubelets_status_update_leaves_the_nodes_as_the_filters_read_them() -> None:
    view = started_view(cluster_of(node("n0")))
    before = view.node_changes
    heartbeat = node("n0")
    heartbeat["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                          "lastHeartbeatTime": "2026-12-01T13:00:00Z"}]
    view.handle("nodes", "MODIFIED", heartbeat)
    assert view.node_changes == before
    view.handle("nodes", "MODIFIED", node("n0", labels={"rack": "r1"}))
    assert view.node_changes > before
