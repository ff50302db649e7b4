"""Preemption on a real kube-apiserver takes victims as kube-scheduler would, with gangs as
units, and binds the preemptor only once they are gone (skipped without KUBEBUILDER_ASSETS).

Priorities come from real PriorityClasses through the API server's Priority admission; the
victims are pods Fluence itself bound. There is no kubelet: an evicted pod stays
terminating until the test, standing in for its kubelet, removes it (:meth:`Victims.stop`).
With ``FLUENCE_FLUXION_LIB`` set the scheduler matches with Fluxion, and the same victims
are expected.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.testing import make_pod_dict, make_pod_group_dict
from tests.e2e.test_scheduler_e2e import running
from tests.e2e.test_topology_preemption_e2e import NODE_LABEL, PreemptingRacks

pytestmark = pytest.mark.e2e

LOW, LOWISH, MID, HIGH = 10, 20, 50, 500
MATCHER = "fluxion" if os.environ.get("FLUENCE_FLUXION_LIB") else "embedded"
"""The matcher the scheduler places with: Fluxion when its library is named."""


class Victims(PreemptingRacks):
    """Nodes, pods held to one node each, gangs, and the kubelet's last word on a pod."""

    def held_to(self, name: str, node: str, cpu: str, value: int,
                group: str | None = None, *, wait: bool = True) -> None:
        """A ``cpu`` pod of priority ``value`` that only ``node`` may take (bound by Fluence,
        waited for unless ``wait`` is false)."""
        self.kube.create("pods", make_pod_dict(
            name, cpu, namespace=self.ns, group=group, priorityClassName=f"{self.ns}-p{value}",
            nodeSelector={"e2e-ns": self.ns, NODE_LABEL: node}), self.ns)
        if wait:
            self.wait(lambda: self.standing(name), f"{name} bound")

    def bound_pod_group(self, name: str, min_count: int, **spec: Any) -> None:
        group = make_pod_group_dict(name, min_count, self.ns)
        group["spec"].update(spec)
        self.kube.create("podgroups", group, self.ns)

    def terminating(self, pod: str) -> bool:
        found = self.kube.get("pods", pod, self.ns)
        return bool(found and found["metadata"].get("deletionTimestamp"))

    def stop(self, pods: list[str]) -> None:
        """What a kubelet does once an evicted pod's containers stopped: it goes."""
        for pod in pods:
            self.kube.delete("pods", pod, self.ns, grace_period_seconds=0)

    def evicted_of(self, pods: list[str]) -> list[str]:
        return [pod for pod in pods if self.evicted(pod)]

    def nominated(self, pod: str) -> str | None:
        found = self.kube.get("pods", pod, self.ns) or {}
        return (found.get("status") or {}).get("nominatedNodeName")


@pytest.fixture
def victims(kube: KubeCluster, kube_namespace: str) -> Iterator[Victims]:
    harness = Victims(kube, kube_namespace)
    try:
        with running(harness):
            for value in (LOW, LOWISH, MID, HIGH):
                harness.priority_class(value)
            yield harness
    finally:
        for name in harness.classes:
            kube.delete("priorityclasses", name)


def _settle(victims: Victims, preemptor: str, pods: list[str]) -> list[str]:
    """Wait for ``preemptor``'s victims among ``pods`` to be evicted, and for it to be
    nominated (or bound) once they all are, and return them (the evictions of one
    preemption are issued before its nomination)."""
    victims.wait(lambda: bool(victims.evicted_of(pods)), f"a victim for {preemptor}")
    victims.wait(lambda: bool(victims.nominated(preemptor) or victims.node_of(preemptor)),
                 f"{preemptor} nominated")
    return victims.evicted_of(pods)


def _waits_for(victims: Victims, preemptor: str, evicted: list[str]) -> None:
    """``preemptor`` is nominated, not bound, while ``evicted`` terminate; bound once the
    test, standing in for their kubelet, removes them."""
    assert victims.node_of(preemptor) is None, f"{preemptor} bound beside its victims"
    assert victims.nominated(preemptor)
    victims.stop(evicted)
    victims.wait(lambda: bool(victims.node_of(preemptor)), f"{preemptor} bound")


def test_a_gang_keeps_its_min_count_when_one_members_room_is_enough(victims: Victims) -> None:
    a, b = victims.racked_node("a", "r1"), victims.racked_node("b", "r1")
    victims.start_scheduler()
    victims.bound_pod_group("g", 3)
    for i, node in enumerate((a, a, b)):
        victims.held_to(f"g-{i}", node, "2", LOW, group="g", wait=False)
    victims.wait(lambda: all(victims.standing(f"g-{i}") for i in range(3)), "the gang bound")
    victims.held_to("g-3", b, "2", LOW, group="g")  # a late member: a record of its own
    members = [f"g-{i}" for i in range(4)]

    victims.pod("high", "2", priorityClassName=f"{victims.ns}-p{HIGH}")
    evicted = _settle(victims, "high", members)
    assert len(evicted) == 1, f"evicted {evicted}: the gang needs only one member's room"
    assert sum(victims.standing(m) for m in members) == 3
    _waits_for(victims, "high", evicted)
    assert victims.evicted_of(members) == evicted


def test_a_gang_under_disruption_mode_pod_group_goes_whole(victims: Victims) -> None:
    a, b = victims.racked_node("a", "r1"), victims.racked_node("b", "r1")
    victims.start_scheduler()
    victims.bound_pod_group("g", 1, disruptionMode="PodGroup")
    for i, node in enumerate((a, a, b, b)):
        victims.held_to(f"g-{i}", node, "2", LOW, group="g")
    members = [f"g-{i}" for i in range(4)]

    victims.pod("high", "2", priorityClassName=f"{victims.ns}-p{HIGH}")
    evicted = _settle(victims, "high", members)
    assert evicted == members, f"evicted {evicted}: the gang goes whole or not at all"
    _waits_for(victims, "high", evicted)


def test_the_rack_with_the_fewest_victims_is_freed_for_a_rack_required_gang(
        victims: Victims) -> None:
    a0, a1 = victims.racked_node("a0", "r1"), victims.racked_node("a1", "r1")
    b0, _ = victims.racked_node("b0", "r2"), victims.racked_node("b1", "r2")
    victims.start_with_levels()
    for pod, node in (("low-a0", a0), ("low-a1", a1), ("low-b0", b0)):
        victims.held_to(pod, node, "4", LOW)
    fillers = ["low-a0", "low-a1", "low-b0"]

    victims.rack_gang_of("g", 2, HIGH)
    evicted = _settle(victims, "g-0", fillers)
    assert evicted == ["low-b0"], f"evicted {evicted}: rack r2 needs one eviction, r1 two"
    _waits_for(victims, "g-0", evicted)
    victims.wait(lambda: all(victims.node_of(f"g-{i}") for i in range(2)), "the gang bound")
    assert {victims.rack_of(f"g-{i}") for i in range(2)} == {f"{victims.ns}-r2"}


def test_a_pod_evicts_one_nodes_worth_of_the_lowest_priority_victims(victims: Victims) -> None:
    a, b = victims.racked_node("a", "r1"), victims.racked_node("b", "r1")
    scheduler = victims.start_scheduler()
    assert scheduler.view.matcher.name.endswith(MATCHER), scheduler.view.matcher.name
    # a holds two of the lowest priority and two of a middle one; b four just above the
    # lowest: b's four are the least disruptive, while taking the lowest first evicts six.
    small = []
    for i, value in enumerate((LOW, LOW, MID, MID)):
        victims.held_to(f"a-{i}", a, "1", value)
        small.append(f"a-{i}")
    for i in range(4):
        victims.held_to(f"b-{i}", b, "1", LOWISH)
        small.append(f"b-{i}")

    victims.pod("big", "4", priorityClassName=f"{victims.ns}-p{HIGH}")
    evicted = _settle(victims, "big", small)
    assert len(evicted) == 4, f"evicted {len(evicted)} of 8: {evicted}"
    assert len({victims.node_of(pod) for pod in evicted}) == 1, "all on one node"
    _waits_for(victims, "big", evicted)


def test_the_preemptor_is_bound_only_once_its_victims_are_gone(victims: Victims) -> None:
    a = victims.racked_node("a", "r1")
    victims.start_scheduler()
    victims.held_to("low", a, "4", LOW)

    victims.pod("high", "4", priorityClassName=f"{victims.ns}-p{HIGH}")
    victims.wait(lambda: victims.terminating("low"), "low evicted")
    victims.wait(lambda: victims.nominated("high") == a, "high nominated to a")
    assert victims.node_of("high") is None, "bound while its victim still terminates"
    victims.stop(["low"])
    victims.wait(lambda: victims.node_of("high") == a, "high bound to a")


def test_a_pod_group_s_own_priority_class_shields_its_members(victims: Victims) -> None:
    a = victims.racked_node("a", "r1")
    victims.start_scheduler()
    victims.bound_pod_group("g", 1, priorityClassName=f"{victims.ns}-p{HIGH}")
    group = victims.kube.get("podgroups", "g", victims.ns) or {}
    assert group["spec"].get("priority") == HIGH, "the Priority admission resolves the class"
    for i in range(2):
        victims.held_to(f"g-{i}", a, "2", LOW, group="g")

    victims.pod("mid", "2", priorityClassName=f"{victims.ns}-p{MID}")
    victims.wait(lambda: bool(victims.events("mid", "FailedScheduling")
                              or victims.evicted_of(["g-0", "g-1"])), "mid told it waits")
    assert not victims.evicted_of(["g-0", "g-1"]), "the gang's class outranks mid"
    assert victims.standing("g-0") and victims.standing("g-1")
    assert not victims.events("g-0", "Preempted") and not victims.events("g-1", "Preempted")
