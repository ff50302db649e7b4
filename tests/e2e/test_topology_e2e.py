"""Topology on a real kube-apiserver: a rack-required gang stays in one rack, waits with the
reason when none can hold it, and follows a relabelled node (skipped without
KUBEBUILDER_ASSETS)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import scheduler_beside
from tests.e2e.test_scheduler_e2e import Run

pytestmark = pytest.mark.e2e


class Racks(Run):
    """The scheduler's run helper, with racked nodes and rack-required gangs."""

    def __init__(self, kube: KubeCluster, namespace: str) -> None:
        super().__init__(kube, namespace)
        self._topology = ExitStack()

    def start_with_levels(self) -> None:
        settings = load_settings(topology_levels=[names.RACK_LABEL])
        self._topology.enter_context(scheduler_beside(self.kube, settings))

    def stop(self) -> None:
        self._topology.close()

    def racked(self, suffix: str, rack: str) -> str:
        name = self.node(suffix)
        self.relabel(name, rack)
        return name

    def relabel(self, node: str, rack: str) -> None:
        self.kube.patch("nodes", node, {"metadata": {"labels": {
            names.RACK_LABEL: f"{self.ns}-{rack}"}}})

    def rack_gang(self, name: str, size: int, cpu: str) -> None:
        self.kube.create("podgroups", {"metadata": {"name": name}, "spec": {
            "schedulingPolicy": {"gang": {"minCount": size}},
            "schedulingConstraints": {"topology": [{"key": names.RACK_LABEL}]}}}, self.ns)
        for i in range(size):
            self.pod(f"{name}-{i}", cpu, group=name)

    def rack_of(self, pod: str) -> str | None:
        node = self.node_of(pod)
        found = self.kube.get("nodes", node) if node else None
        return None if found is None else found["metadata"]["labels"].get(names.RACK_LABEL)


@pytest.fixture
def racks(kube: KubeCluster, kube_namespace: str) -> Iterator[Racks]:
    harness = Racks(kube, kube_namespace)
    yield harness
    harness.stop()
    for node in harness.nodes:
        kube.delete("nodes", node)


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
