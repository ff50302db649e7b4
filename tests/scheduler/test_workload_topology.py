"""A gang whose PodGroup was made from a 1.36 Workload's template keeps the template's
topology constraint, even when the PodGroup itself names none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fluence_core import names
from fluence_core.kube.api import WORKLOADS
from tests.scheduler.conftest import Harness, node, pod, pod_group

LEVELS = f"topology:\n  levels: [{names.RACK_LABEL}]\n"


def _racked(name: str, rack: str) -> dict[str, Any]:
    """A node of rack ``rack``."""
    return node(name, labels={names.RACK_LABEL: rack})


def _workload(key: str | None) -> dict[str, Any]:
    template: dict[str, Any] = {"name": "workers",
                                "schedulingPolicy": {"gang": {"minCount": 2}}}
    if key is not None:
        template["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"metadata": {"name": "train", "namespace": "default"},
            "spec": {"podGroupTemplates": [template]}}


def _from_template(name: str) -> dict[str, Any]:
    group = pod_group(name, 2)
    group["spec"]["podGroupTemplateRef"] = {
        "workload": {"workloadName": "train", "podGroupTemplateName": "workers"}}
    return group


def _two_single_node_racks(harness_factory: Callable[..., Harness]) -> Harness:
    return harness_factory(_racked("n0", "r1"), _racked("n1", "r2"), _from_template("g"),
                           pod("g0", "3", group="g"), pod("g1", "3", group="g"),
                           resources=LEVELS)


def test_a_workload_templates_required_rack_keeps_its_gang_out_of_two_racks(
        harness_factory: Callable[..., Harness]) -> None:
    h = _two_single_node_racks(harness_factory)
    h.cluster.create(WORKLOADS, _workload(names.RACK_LABEL), "default")
    h.cycle()
    assert (h.node_of("g0"), h.node_of("g1")) == (None, None)
    why = " ".join(e["message"] for e in h.cluster.events(involved_name="g0"))
    assert "must stay inside one rack" in why


def test_the_same_gang_from_a_template_without_a_constraint_spans_the_racks(
        harness_factory: Callable[..., Harness]) -> None:
    h = _two_single_node_racks(harness_factory)
    h.cluster.create(WORKLOADS, _workload(None), "default")
    h.cycle()
    assert {h.node_of("g0"), h.node_of("g1")} == {"n0", "n1"}


def test_a_workload_seen_after_its_pod_group_still_constrains_the_gang(
        harness_factory: Callable[..., Harness]) -> None:
    h = _two_single_node_racks(harness_factory)
    h.cycle()  # no Workload yet: nothing says the gang must stay in one rack ...
    assert {h.node_of("g0"), h.node_of("g1")} == {"n0", "n1"}
    h2 = _two_single_node_racks(harness_factory)
    h2.cluster.create(WORKLOADS, _workload(names.RACK_LABEL), "default")
    h2.scheduler.pump()  # ... but once the watch shows it, the template's constraint holds
    h2.cycle()
    assert (h2.node_of("g0"), h2.node_of("g1")) == (None, None)


def test_the_pod_groups_own_constraint_wins_over_its_templates(
        harness_factory: Callable[..., Harness]) -> None:
    group = _from_template("g")
    group["spec"]["schedulingConstraints"] = {"topology": [{"key": names.RACK_LABEL}]}
    h = harness_factory(_racked("n0", "r1"), _racked("n1", "r2"), group,
                        pod("g0", "3", group="g"), pod("g1", "3", group="g"),
                        resources=LEVELS)
    h.cluster.create(WORKLOADS, _workload("example.com/not-a-level"), "default")
    h.cycle()  # the template's level is not configured, but the PodGroup's own is read
    why = " ".join(e["message"] for e in h.cluster.events(involved_name="g0"))
    assert "must stay inside one rack" in why and "not-a-level" not in why
