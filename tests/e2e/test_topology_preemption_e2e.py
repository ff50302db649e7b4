"""Preemption for a rack-required gang on a real kube-apiserver: it waits rather than take
room across racks, and when one rack can be freed, only that rack's pods are evicted and
the gang is bound inside it (skipped without KUBEBUILDER_ASSETS).

The unit tests (``tests/scheduler/test_preempt.py``) check the same on the fake; here the
priorities come from real PriorityClasses through the API server's Priority admission,
the victims are pods Fluence itself bound, and eviction is a real delete (no kubelet, so
an evicted pod stays terminating until the test removes it, as its kubelet would).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.testing import make_pod_dict
from tests.e2e.test_scheduler_e2e import running
from tests.e2e.test_topology_e2e import Racks

pytestmark = pytest.mark.e2e

NODE_LABEL = "e2e-node"
LOW, GANG, HIGH = 10, 100, 500


class PreemptingRacks(Racks):
    """Racks with PriorityClasses of this namespace, and pods held to one node each."""

    def __init__(self, kube: KubeCluster, namespace: str) -> None:
        super().__init__(kube, namespace)
        self.classes: list[str] = []

    def priority_class(self, value: int) -> str:
        name = f"{self.ns}-p{value}"
        self.kube.create("priorityclasses", {"metadata": {"name": name}, "value": value})
        self.classes.append(name)
        return name

    def racked_node(self, suffix: str, rack: str) -> str:
        name = self.racked(suffix, rack)
        self.kube.patch("nodes", name, {"metadata": {"labels": {NODE_LABEL: name}}})
        return name

    def filler(self, name: str, node: str, value: int) -> None:
        """A 4-core pod of priority ``value`` that only ``node`` may take (Fluence binds it,
        so it is held as Fluence's own placement, a possible victim)."""
        self.kube.create("pods", make_pod_dict(
            name, "4", namespace=self.ns, priorityClassName=f"{self.ns}-p{value}",
            nodeSelector={"e2e-ns": self.ns, NODE_LABEL: node}), self.ns)

    def rack_gang_of(self, name: str, size: int, value: int) -> None:
        group: dict[str, Any] = {"metadata": {"name": name}, "spec": {
            "schedulingPolicy": {"gang": {"minCount": size}},
            "schedulingConstraints": {"topology": [{"key": names.RACK_LABEL}]}}}
        self.kube.create("podgroups", group, self.ns)
        for i in range(size):
            self.pod(f"{name}-{i}", "4", group=name, priorityClassName=f"{self.ns}-p{value}")

    def standing(self, pod: str) -> bool:
        """Bound and not being deleted."""
        found = self.kube.get("pods", pod, self.ns)
        return bool(found and found["spec"].get("nodeName")
                    and not found["metadata"].get("deletionTimestamp"))

    def evicted(self, pod: str) -> bool:
        found = self.kube.get("pods", pod, self.ns)
        return found is None or bool(found["metadata"].get("deletionTimestamp"))


@pytest.fixture
def racks(kube: KubeCluster, kube_namespace: str) -> Iterator[PreemptingRacks]:
    harness = PreemptingRacks(kube, kube_namespace)
    try:
        with running(harness):
            yield harness
    finally:
        for name in harness.classes:
            kube.delete("priorityclasses", name)


def test_preemption_never_places_a_rack_required_gang_across_racks_then_frees_one_rack(
        racks: PreemptingRacks) -> None:
    for value in (LOW, GANG, HIGH):
        racks.priority_class(value)
    a0, a1 = racks.racked_node("a0", "r1"), racks.racked_node("a1", "r1")
    b0, b1 = racks.racked_node("b0", "r2"), racks.racked_node("b1", "r2")
    racks.start_with_levels()
    # One at a time, r2's first: a preemptor blind to racks would take low-b0 (the older
    # of the two equal victims) first.
    for pod, node, value in (("low-b0", b0, LOW), ("high-b1", b1, HIGH),
                             ("low-a0", a0, LOW), ("high-a1", a1, HIGH)):
        racks.filler(pod, node, value)
        racks.wait(lambda: racks.standing(pod), f"{pod} bound")

    # Evicting low-a0 and low-b0 would make room only across racks r1 and r2.
    racks.rack_gang_of("g", 2, GANG)
    racks.wait(lambda: bool(racks.events("g-0", "FailedScheduling")), "the gang told it waits")
    time.sleep(3)  # several more cycles, each free to preempt
    assert not any(racks.node_of(f"g-{i}") for i in range(2)), "placed against its rack"
    assert racks.standing("low-a0") and racks.standing("low-b0"), "evicted for nothing"
    assert not racks.events("low-a0", "Preempted") and not racks.events("low-b0", "Preempted")

    # Rack r1 can now be freed by evicting low-a0 alone; r2's low-b0 must stay. The gang
    # waits for low-a0 to be gone (here no kubelet ends it: the test does).
    racks.kube.delete("pods", "high-a1", racks.ns, grace_period_seconds=0)
    racks.wait(lambda: racks.evicted("low-a0"), "low-a0 evicted")
    assert not any(racks.node_of(f"g-{i}") for i in range(2)), "bound beside its victim"
    racks.kube.delete("pods", "low-a0", racks.ns, grace_period_seconds=0)
    racks.wait(lambda: all(racks.node_of(f"g-{i}") for i in range(2)), "the gang bound")
    assert {racks.rack_of(f"g-{i}") for i in range(2)} == {f"{racks.ns}-r1"}
    assert racks.evicted("low-a0")
    assert racks.standing("low-b0") and racks.standing("high-b1")
