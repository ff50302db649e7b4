"""Topology on a real kube-apiserver: a rack-required gang stays in one rack, waits with the
reason when none can hold it, and follows a relabelled node; the constraint may be written
on a Workload's template or on a Job alone (skipped without KUBEBUILDER_ASSETS)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import wait_for, webhook_beside
from fluence_core.stated_topology import read_constraint
from tests.e2e.test_scheduler_e2e import Run, running

pytestmark = pytest.mark.e2e


class Racks(Run):
    """The scheduler's run helper, with racked nodes and rack-required gangs."""

    def start_with_levels(self) -> None:
        self.start_scheduler(load_settings(topology_levels=[names.RACK_LABEL]))

    def racked(self, suffix: str, rack: str) -> str:
        name = self.node(suffix)
        self.relabel(name, rack)
        return name

    def relabel(self, node: str, rack: str) -> None:
        self.kube.patch("nodes", node, {"metadata": {"labels": {
            names.RACK_LABEL: f"{self.ns}-{rack}"}}})

    def rack_gang(self, name: str, size: int, cpu: str) -> None:
        self.gang(name, size, cpu, {"topology": [{"key": names.RACK_LABEL}]})

    def rack_of(self, pod: str) -> str | None:
        node = self.node_of(pod)
        found = self.kube.get("nodes", node) if node else None
        return None if found is None else found["metadata"]["labels"].get(names.RACK_LABEL)


@pytest.fixture
def racks(kube: KubeCluster, kube_namespace: str) -> Iterator[Racks]:
    with running(Racks(kube, kube_namespace)) as harness:
        yield harness


def test_a_rack_required_gang_is_bound_inside_the_one_rack_that_holds_it(racks: Racks) -> None:
    for i in range(2):
        racks.racked(f"a{i}", "r1")
    for i in range(3):
        racks.racked(f"b{i}", "r2")
    racks.start_with_levels()
    racks.rack_gang("g", 3, "4")
    racks.wait(lambda: all(racks.node_of(f"g-{i}") for i in range(3)), "the gang bound")
    assert {racks.rack_of(f"g-{i}") for i in range(3)} == {f"{racks.ns}-r2"}


def test_a_gang_no_rack_holds_waits_saying_why_then_follows_a_relabelled_node(
        racks: Racks) -> None:
    moving = racks.racked("a0", "r1")
    racks.racked("a1", "r1")
    for i in range(2):
        racks.racked(f"b{i}", "r2")
    racks.start_with_levels()
    racks.rack_gang("g", 3, "4")
    def why() -> str:
        return " | ".join(e["message"] for e in racks.events("g-0", "FailedScheduling"))

    racks.wait(lambda: "must stay inside one rack" in why(), "the rack's FailedScheduling event")
    assert f"the best rack is {racks.ns}-r" in why() and "lacks 4 cores" in why()
    assert not any(racks.node_of(f"g-{i}") for i in range(3))
    racks.relabel(moving, "r2")
    racks.wait(lambda: all(racks.node_of(f"g-{i}") for i in range(3)), "the gang bound")
    assert {racks.rack_of(f"g-{i}") for i in range(3)} == {f"{racks.ns}-r2"}


def test_a_workload_templates_required_rack_holds_a_gang_whose_pod_group_names_none(
        racks: Racks) -> None:
    moving = racks.racked("a0", "r1")
    racks.racked("a1", "r1")
    for i in range(2):
        racks.racked(f"b{i}", "r2")
    stored = racks.kube.create("workloads", {"metadata": {"name": "train"}, "spec": {
        "podGroupTemplates": [{
            "name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}},
            "schedulingConstraints": {"topology": [{"key": names.RACK_LABEL}]}}]}}, racks.ns)
    assert stored["spec"]["podGroupTemplates"][0]["schedulingConstraints"] == {
        "topology": [{"key": names.RACK_LABEL}]}, "the API server kept the template's field"
    racks.start_with_levels()
    racks.kube.create("podgroups", {"metadata": {"name": "g"}, "spec": {
        "schedulingPolicy": {"gang": {"minCount": 3}},
        "podGroupTemplateRef": {"workload": {"workloadName": "train",
                                             "podGroupTemplateName": "workers"}}}}, racks.ns)
    for i in range(3):
        racks.pod(f"g-{i}", "4", group="g")

    def why() -> str:
        return " | ".join(e["message"] for e in racks.events("g-0", "FailedScheduling"))

    racks.wait(lambda: "must stay inside one rack" in why(), "the rack's FailedScheduling event")
    assert not any(racks.node_of(f"g-{i}") for i in range(3))
    racks.relabel(moving, "r2")
    racks.wait(lambda: all(racks.node_of(f"g-{i}") for i in range(3)), "the gang bound")
    assert {racks.rack_of(f"g-{i}") for i in range(3)} == {f"{racks.ns}-r2"}


def test_a_jobs_own_topology_annotation_reaches_the_pod_group_the_webhook_makes(
        kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    ns = kube_namespace
    settings = load_settings(webhook_config=f"fluence-topology-{ns}")
    try:
        with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                            resources=("pods", "jobs")):
            kube.create("jobs", {"metadata": {
                "name": "train",
                "annotations": {names.TOPOLOGY_REQUIRED_ANNOTATION: names.RACK_LABEL}},
                "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2,
                         "suspend": True,
                         "template": {"metadata": {"labels": {names.GROUP_LABEL: "train"}},
                                      "spec": {"schedulerName": names.SCHEDULER_NAME,
                                               "restartPolicy": "Never",
                                               "containers": [{"name": "c",
                                                               "image": "busybox"}]}}}}, ns)
            group = wait_for(lambda: kube.get("podgroups", "train", ns),
                             "the Job's PodGroup, made by the webhook's controller")
        assert group["spec"]["schedulingConstraints"] == {
            "topology": [{"key": names.RACK_LABEL}]}
        assert read_constraint(group, []).required[0] == names.RACK_LABEL
    finally:
        kube.delete("jobs", "train", ns)
