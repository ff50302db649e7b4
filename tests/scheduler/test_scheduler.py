"""The scheduling loop over the in-memory cluster: one behaviour per test."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from fluence_core import hookimpl, names
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.errors import FluenceError
from fluence_core.kube.errors import Conflict
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.plugins import get_plugin_manager
from fluence_core.resource_config import parse_resource_config
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from tests.scheduler.conftest import Harness, node, pod, pod_group

QPU = """
resources:
  - type: qpu
    name: cepheus
    attributes: {provider: braket, region: us-east-1}
"""

Factory = Callable[..., Harness]


def test_a_single_pod_is_bound_and_told(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("solo", "2"))
    results = h.cycle()
    assert results[0].placed == {"default/solo": "n0"}
    assert h.node_of("solo") == "n0"
    assert h.cluster.events(reason="Scheduled", involved_name="solo")
    annotations = h.cluster.get(PODS, "solo", "default")["metadata"].get("annotations") or {}
    assert names.JOBIDS_ANNOTATION not in annotations, "its binding is its record"


def test_pods_of_other_schedulers_are_left_alone(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("theirs", scheduler="default-scheduler"))
    assert h.cycle() == []
    assert h.node_of("theirs") is None


def test_a_gang_is_placed_whole_with_its_record_on_the_pod_group(harness_factory: Factory) -> None:
    members = [pod(f"w{i}", "2", group="gang") for i in range(4)]
    h = harness_factory(node("n0"), node("n1"), pod_group("gang", 4), *members)
    h.cycle()
    assert sorted(h.node_of(f"w{i}") for i in range(4)) == ["n0", "n0", "n1", "n1"]
    group = h.cluster.get(PODGROUPS, "gang", "default")
    record = json.loads(group["metadata"]["annotations"][names.ALLOCATION_ANNOTATION])
    assert sorted(record[0]["pods"]) == ["w0", "w1", "w2", "w3"]
    conditions = {c["type"]: c["status"] for c in group["status"]["conditions"]}
    assert conditions["PodGroupScheduled"] == "True"


def test_a_gang_waits_for_min_count_ungated_members(harness_factory: Factory) -> None:
    members = [pod(f"w{i}", group="gang") for i in range(3)]
    gated = pod("w3", group="gang", gates=[names.QUANTUM_GATE])
    h = harness_factory(node("n0"), pod_group("gang", 4), *members, gated)
    h.cycle()
    h.cycle()  # still incomplete past FLUENCE_ARRIVAL_REPORT_SECONDS: now it is told
    assert all(h.node_of(f"w{i}") is None for i in range(4))
    waiting = h.cluster.events(reason="FailedScheduling", involved_name="w0")
    assert "3 of 4 members ready (1 gated)" in waiting[-1]["message"]
    condition = h.cluster.get(PODS, "w0", "default")["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    h.cluster.patch(PODS, "w3", {"spec": {"schedulingGates": []}}, "default")
    h.cycle()
    assert all(h.node_of(f"w{i}") == "n0" for i in range(4))


def test_gated_pods_are_never_placed(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("held", gates=[names.QUANTUM_GATE]))
    h.cycle()
    assert h.node_of("held") is None


def test_contending_gangs_never_run_partially(harness_factory: Factory) -> None:
    first = [pod(f"a{i}", "4", group="a") for i in range(2)]
    second = [pod(f"b{i}", "4", group="b") for i in range(2)]
    h = harness_factory(node("n0"), node("n1"), node("n2"), pod_group("a", 2), pod_group("b", 2),
                        *first, *second)
    h.cycle()
    placed_a = [h.node_of(f"a{i}") for i in range(2)]
    placed_b = [h.node_of(f"b{i}") for i in range(2)]
    assert all(placed_a) and not any(placed_b)
    reason = h.cluster.events(reason="FailedScheduling", involved_name="b0")[-1]["message"]
    assert "compute jobspec does not fit now" in reason


def test_finishing_a_gang_frees_room_for_the_waiting_one(harness_factory: Factory) -> None:
    first = [pod(f"a{i}", "4", group="a") for i in range(2)]
    second = [pod(f"b{i}", "4", group="b") for i in range(2)]
    h = harness_factory(
        node("n0"), node("n1"), pod_group("a", 2), pod_group("b", 2), *first, *second
    )
    h.cycle()
    assert not h.node_of("b0")
    h.finish("a0")
    h.cycle()
    assert not h.node_of("b0"), "one member finishing does not release the gang's allocation"
    h.finish("a1", "Failed")
    h.cycle()
    assert h.node_of("b0") and h.node_of("b1")


def test_deleting_the_pod_group_cancels_its_allocation(harness_factory: Factory) -> None:
    first = [pod(f"a{i}", "4", group="a") for i in range(2)]
    h = harness_factory(node("n0"), node("n1"), pod_group("a", 2), *first, pod("late", "4"))
    h.cycle()
    assert h.node_of("late") is None
    h.cluster.delete(PODGROUPS, "a", "default")
    h.cycle()
    assert h.node_of("late") is not None


def test_deleting_a_lone_pod_cancels_its_allocation(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("one", "4"), pod("two", "4"))
    h.cycle()
    assert h.node_of("one") == "n0" and h.node_of("two") is None
    h.cluster.delete(PODS, "one", "default")
    h.cycle()
    assert h.node_of("two") == "n0"


def test_a_restart_restores_allocations_and_never_double_allocates(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod("first", "4"))
    h.cycle()
    h.add(pod("second", "4"))
    scheduler = h.restart()
    assert [a.jobid for a in scheduler.matcher.allocations().values()] == [1]
    h.cycle()
    assert h.node_of("second") is None
    h.finish("first")
    h.cycle()
    assert h.node_of("second") == "n0"


def test_a_restart_drops_records_whose_pods_are_gone(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod_group("g", 1), pod("m", "4", group="g"))
    h.cycle()
    h.cluster.delete(PODS, "m", "default")
    scheduler = h.restart()
    assert dict(scheduler.matcher.allocations()) == {}
    annotations = h.cluster.get(PODGROUPS, "g", "default")["metadata"].get("annotations") or {}
    assert names.ALLOCATION_ANNOTATION not in annotations


def test_a_cordoned_node_takes_no_new_pods(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), node("n1"), pod("a", "4"))
    h.cycle()
    other = {"n0": "n1", "n1": "n0"}[h.node_of("a") or ""]
    h.cluster.patch(NODES, other, {"spec": {"unschedulable": True}})
    h.add(pod("b", "4"))
    h.cycle()
    assert h.node_of("b") is None
    h.cluster.patch(NODES, other, {"spec": {"unschedulable": False}})
    h.cycle()
    assert h.node_of("b") == other


def test_a_new_node_lets_a_waiting_pod_in(harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod("big", "4"))
    h.cycle()
    assert h.node_of("big") is None
    h.add(node("n1", cpu=8))
    h.cycle()
    assert h.node_of("big") == "n1"


def test_pods_bound_by_other_schedulers_take_their_room(harness_factory: Factory) -> None:
    theirs = pod("theirs", "3", scheduler="default-scheduler", node_name="n0")
    h = harness_factory(node("n0"), node("n1"), theirs, pod("ours", "2"))
    h.cycle()
    assert h.node_of("ours") == "n1"


def test_virtual_resources_are_announced_on_the_pod(harness_factory: Factory) -> None:
    quantum = pod("q", requests={"fluxion.flux-framework.org/qpu": "1"},
                  annotations={f"{names.REQUIRE_ANNOTATION_PREFIX}region": "us-east-1"})
    h = harness_factory(node("n0"), quantum, resources=QPU)
    h.cycle()
    annotations = h.cluster.get(PODS, "q", "default")["metadata"]["annotations"]
    assert annotations[names.BACKEND_ANNOTATION] == "cepheus"
    assert annotations[names.attr_annotation("provider")] == "braket"
    assert h.node_of("q") == "n0"


def test_a_second_pod_waits_for_the_only_qpu(harness_factory: Factory) -> None:
    wants = {"fluxion.flux-framework.org/qpu": "1"}
    h = harness_factory(
        node("n0"), pod("q1", requests=wants), pod("q2", requests=wants), resources=QPU
    )
    h.cycle()
    assert h.node_of("q1") == "n0" and h.node_of("q2") is None
    reason = h.cluster.events(reason="FailedScheduling", involved_name="q2")[-1]["message"]
    assert "qpu jobspec does not fit now" in reason


def test_a_failed_bind_gives_the_allocation_back(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("doomed", "4"))
    real_bind = h.cluster.bind

    def refuse(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        raise Conflict(409, "simulated refusal", "Conflict")

    h.cluster.bind = refuse  # type: ignore[method-assign]
    results = h.cycle()
    assert "binding failed" in (results[0].reason or "")
    assert dict(h.scheduler.matcher.allocations()) == {}
    annotations = h.cluster.get(PODS, "doomed", "default")["metadata"].get("annotations") or {}
    assert names.ALLOCATION_ANNOTATION not in annotations
    h.cluster.bind = real_bind  # type: ignore[method-assign]
    h.cluster.patch(NODES, "n0", {"metadata": {"labels": {"touched": "yes"}}})
    h.scheduler.view.generation += 1
    h.cycle()
    assert h.node_of("doomed") == "n0"


def test_higher_priority_groups_go_first(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("low", "4", priority=1), pod("high", "4", priority=100))
    h.cycle()
    assert h.node_of("high") == "n0" and h.node_of("low") is None


def test_a_group_that_does_not_fit_is_not_retried_until_something_changes(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0", cpu=2), pod("big", "4"))
    assert len(h.cycle()) == 1
    assert h.cycle() == [], "no change, no new attempt"
    h.add(node("n1", cpu=2))
    assert len(h.cycle()) == 1


def test_preemption_evicts_lower_priority_unprotected_pods(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("low", "4", priority=1))
    h.cycle()
    h.add(pod("high", "4", priority=100))
    h.cycle()
    assert h.cluster.get(PODS, "low", "default") is None
    h.cycle()
    assert h.node_of("high") == "n0"


def test_a_preemptor_is_nominated_and_bound_only_after_its_victims_are_gone(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod("low", "4", priority=1))
    h.cycle()
    h.add(pod("high", "4", priority=100))
    h.cycle()
    high = h.cluster.get(PODS, "high", "default")
    assert high is not None and high["status"].get("nominatedNodeName") == "n0"
    assert h.node_of("high") is None, "bound in the cycle that evicted, before the victim went"
    h.cycle()
    assert h.node_of("high") == "n0"


def test_protected_pods_are_never_preempted(harness_factory: Factory) -> None:
    protected = pod("quantum", "4", priority=1, annotations={names.PROTECTED_ANNOTATION: "true"})
    h = harness_factory(node("n0"), protected)
    h.cycle()
    h.add(pod("high", "4", priority=100))
    h.cycle()
    assert h.node_of("quantum") == "n0" and h.node_of("high") is None


def test_an_allocatable_change_keeps_what_runs_there(harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=4), pod("a", "2"))
    h.cycle()
    h.cluster.patch_status(NODES, "n0", {"status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}})
    h.add(pod("b", "6"))
    h.cycle()
    assert h.node_of("b") == "n0"
    h.add(pod("c", "1"))
    h.cycle()
    assert h.node_of("c") is None


def test_a_config_reload_keeps_held_virtual_resources(harness_factory: Factory) -> None:
    wants = {"fluxion.flux-framework.org/qpu": "1"}
    h = harness_factory(node("n0"), pod("q1", requests=wants), resources=QPU)
    h.cycle()
    bigger = parse_resource_config(QPU.replace("name: cepheus", "name: cepheus\n    count: 2"))
    h.scheduler.reload_config(bigger)
    h.add(pod("q2", requests=wants))
    h.cycle()
    assert h.node_of("q2") == "n0"
    h.add(pod("q3", requests=wants))
    h.cycle()
    assert h.node_of("q3") is None


class _Veto:
    def __init__(self) -> None:
        self.postfilter_reasons: list[str] = []

    @hookimpl
    def fluence_prefilter(self, group: Any, ctx: Any) -> str | None:
        return "maintenance window" if group.name.endswith("blocked") else None

    @hookimpl
    def fluence_filter(self, pod: Any, node: str, ctx: Any) -> str | None:
        return "node n0 is draining" if node == "n0" else None

    @hookimpl
    def fluence_postfilter(self, group: Any, reason: str, ctx: Any) -> list[str]:
        self.postfilter_reasons.append(reason)
        return []


def test_prefilter_filter_and_postfilter_steer_a_cycle(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), node("n1"), pod("blocked", "1"), pod("free", "1"))
    veto = _Veto()
    settings = load_settings(match_policy="lonode")  # n0 is offered first, so the filter sees it
    manager = get_plugin_manager(settings, extra_plugins=[("veto", veto)])
    h.scheduler = Scheduler(h.cluster, settings, manager, clock=h.clock)
    h.scheduler.start()
    h.cycle()
    assert h.node_of("blocked") is None
    assert (
        "prefilter: maintenance window"
        in h.cluster.events(reason="FailedScheduling", involved_name="blocked")[-1]["message"]
    )
    assert h.node_of("free") == "n1"
    assert (
        veto.postfilter_reasons
        and "filter vetoed n0: node n0 is draining" in veto.postfilter_reasons[0]
    )


def test_metrics_count_attempts_and_pending_groups(harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=2), pod("fits", "2"), pod("waits", "2"))
    h.cycle()
    registry = h.scheduler.metrics.registry
    assert (
        registry.get_sample_value("fluence_scheduling_attempts_total", {"result": "scheduled"}) == 1
    )
    assert (
        registry.get_sample_value("fluence_scheduling_attempts_total", {"result": "unschedulable"})
        == 1
    )
    assert registry.get_sample_value("fluence_pending_groups") == 2
    assert registry.get_sample_value("fluence_graph_utilisation", {"resource": "cores"}) == 1.0


def test_a_node_selector_keeps_a_pod_on_matching_nodes(harness_factory: Factory) -> None:
    picky = pod("picky", "1", nodeSelector={"pool": "gpu"})
    h = harness_factory(node("n0"), node("n1"), picky)
    h.cycle()
    assert h.node_of("picky") is None
    h.cluster.patch(NODES, "n1", {"metadata": {"labels": {"pool": "gpu"}}})
    h.cycle()
    assert h.node_of("picky") == "n1"


def test_a_terminating_pod_holds_its_resources_until_it_is_gone(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("a-old", "4"), pod("b-new", "4"))
    h.cycle()
    assert h.node_of("a-old") == "n0"
    terminating = h.cluster.get(PODS, "a-old", "default")
    terminating["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    h.scheduler.handle("pods", "MODIFIED", terminating)
    h.scheduler.view.generation += 1
    h.scheduler.schedule_once()
    assert h.node_of("b-new") is None, "the kubelet has not confirmed: the old pod still runs"
    h.cluster.delete(PODS, "a-old", "default")
    h.cycle()
    assert h.node_of("b-new") == "n0"


def test_a_terminating_unbound_pod_is_never_placed(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"))
    doomed = pod("doomed", "1")
    doomed["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    h.scheduler.handle("pods", "ADDED", doomed)
    assert h.scheduler.schedule_once() == []


def test_a_node_at_its_pod_limit_takes_no_more_pods(harness_factory: Factory) -> None:
    theirs = pod("theirs", "1", scheduler="default-scheduler", node_name="n0")
    h = harness_factory(node("n0", cpu=8, pods="2"), node("n1", cpu=8), theirs,
                        pod("a", "1"), pod("b", "1"))
    settings_first = h.scheduler.settings.graph.match_policy.value
    assert settings_first == "first"
    h.cycle()
    on_n0 = [p for p in ("a", "b") if h.node_of(p) == "n0"]
    assert len(on_n0) <= 1, "n0 admits 2 pods and already runs one"
    assert all(h.node_of(p) for p in ("a", "b"))


def test_the_embedded_matcher_spills_a_gang_past_a_node_at_its_pod_limit(
    harness_factory: Factory,
) -> None:
    members = [pod(f"g{i}", "1", group="g") for i in range(3)]
    h = harness_factory(
        node("n0", cpu=8, pods="2"), node("n1", cpu=8, pods="2"), pod_group("g", 3), *members
    )
    # Fluxion has no pod slots: under it the filter vetoes, and a rematch cannot split a node
    h.scheduler = Scheduler(h.cluster, load_settings(disable_plugins=["fluxion"]), clock=h.clock)
    h.scheduler.start()
    h.cycle()
    placed = [h.node_of(f"g{i}") for i in range(3)]
    assert all(placed)
    assert max(placed.count("n0"), placed.count("n1")) == 2


def test_a_restarted_scheduler_counts_the_pods_already_running(harness_factory: Factory) -> None:
    h = harness_factory(node("n0", cpu=8, pods="1"), pod("first", "1"))
    h.cycle()
    h.add(pod("second", "1"))
    h.restart()
    h.cycle()
    assert h.node_of("second") is None
    reason = h.cluster.events(reason="FailedScheduling", involved_name="second")[-1]["message"]
    # the embedded matcher counts pod slots itself; with Fluxion the filter says it
    assert (
        "compute jobspec does not fit now" in reason or "node n0 admits 1 pods and has 1" in reason
    )


class _MatcherOnce:
    """Offers the embedded matcher for the first graph only (as if its library went away)."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl(tryfirst=True)
    def fluence_matcher(self, settings: Any, graph: Any) -> Any:
        self.calls += 1
        return EmbeddedMatcher(graph) if self.calls == 1 else None


def test_a_reload_no_matcher_answers_raises_and_keeps_the_old_graph(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod("q1", requests={"fluxion.flux-framework.org/qpu": "1"}),
                        resources=QPU)
    settings = load_settings(disable_plugins=["embedded-matcher", "fluxion"])
    manager = get_plugin_manager(settings, extra_plugins=[("once", _MatcherOnce())])
    h.scheduler = Scheduler(h.cluster, settings, manager, config=h.config, clock=h.clock)
    h.scheduler.start()
    h.cycle()
    graph, matcher = h.scheduler.graph, h.scheduler.matcher
    held = dict(matcher.allocations())
    assert held, "q1 holds its compute and its qpu"
    bigger = parse_resource_config(QPU.replace("name: cepheus", "name: cepheus\n    count: 2"))
    with pytest.raises(FluenceError, match="no plugin returned a matcher"):
        h.scheduler.reload_config(bigger)
    assert h.scheduler.graph is graph and h.scheduler.matcher is matcher
    assert h.scheduler.config is h.config
    assert dict(matcher.allocations()) == held


def test_start_raises_the_same_way_when_no_matcher_answers(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"))
    settings = load_settings(disable_plugins=["embedded-matcher", "fluxion"])
    with pytest.raises(FluenceError, match="no plugin returned a matcher"):
        Scheduler(h.cluster, settings, config=h.config).start()


def test_a_lone_pod_placed_before_a_restart_can_still_be_preempted(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod("low", "4", priority=1))
    h.cycle()
    h.restart()
    h.add(pod("high", "4", priority=100))
    h.cycle()
    assert h.cluster.get(PODS, "low", "default") is None
    h.cycle()
    assert h.node_of("high") == "n0"
