"""Soft preferences choose among the feasible nodes, through either matcher's hostlist.

Each case names the nodes of the best preference class that has room; which of
them the matcher takes is its policy's business (the embedded matcher's
``first`` takes the lowest rank, Fluxion's own traversal may not), so the
tables hold for both (``FLUENCE_FLUXION_LIB`` set runs them on Fluxion). Where
one node is expected, it is the last in rank order, so ``first`` would never
pick it unaided.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from tests.scheduler.conftest import Harness, node, pod, pod_group

Factory = Callable[..., Harness]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _node(name: str, zone: str, cpu: int = 4, taints: list[dict[str, str]] | None = None,
          **labels: str) -> dict[str, Any]:
    """A node of ``zone``, labelled with its hostname as the kubelet does, and ``labels``."""
    return node(name, cpu, hostname=True, zone=zone, taints=taints, labels=labels)


def _prefer_nodes(*weighted: tuple[int, str, str]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [
            {"key": k, "operator": "In", "values": [v]}]}} for w, k, v in weighted]}}


def _prefer_pods(kind: str, weight: int, app: str, key: str = HOST) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": weight, "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}}]}}


SOFT = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}
THREE = [_node("n0", "a"), _node("n1", "a", ssd="yes"), _node("n2", "b")]
WEB = {"app": "web"}

OTHER = {"key": "other", "value": "y", "effect": "PreferNoSchedule"}

CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], set[str]]] = [
    ("preferred node affinity picks its node",
     THREE, pod("p", affinity=_prefer_nodes((10, ZONE, "b"))), {"n2"}),
    ("a preferred node without room: the next best fits",
     [_node("n0", "a"), _node("n1", "a"), _node("n2", "b", cpu=1)],
     pod("p", "2", affinity=_prefer_nodes((10, ZONE, "b"))), {"n0", "n1"}),
    ("the heavier term wins, the lighter one is the second tier",
     [_node("n0", "a"), _node("n1", "a", ssd="yes"), _node("n2", "b", cpu=1)],
     pod("p", "2", affinity=_prefer_nodes((50, ZONE, "b"), (10, "ssd", "yes"))), {"n1"}),
    ("PreferNoSchedule taints steer a pod away",
     [_node("n0", "a", taints=[SOFT]), _node("n1", "a", taints=[SOFT]), _node("n2", "b")],
     pod("p"), {"n2"}),
    ("only the taints a pod does not tolerate count",
     [_node("n0", "a", taints=[SOFT]), _node("n1", "a", taints=[SOFT]),
      _node("n2", "b", taints=[OTHER])],
     pod("p", tolerations=[{"key": "soft", "operator": "Exists"}]), {"n0", "n1"}),
    ("ScheduleAnyway spread goes to the emptiest host",
     [*THREE, pod("w0", labels=WEB, node_name="n0"), pod("w1", labels=WEB, node_name="n1")],
     pod("p", labels=WEB, topologySpreadConstraints=[{
         "maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": WEB}}]), {"n2"}),
    ("preferred pod affinity joins the pod it names",
     [*THREE, pod("db", labels={"app": "db"}, node_name="n2")],
     pod("p", affinity=_prefer_pods("podAffinity", 20, "db")), {"n2"}),
    ("preferred pod anti-affinity leaves its host",
     [*THREE, pod("db", labels={"app": "db"}, node_name="n0")],
     pod("p", affinity=_prefer_pods("podAntiAffinity", 20, "db")), {"n1", "n2"}),
    ("preferred pod anti-affinity by zone leaves the zone",
     [*THREE, pod("db", labels={"app": "db"}, node_name="n0")],
     pod("p", affinity=_prefer_pods("podAntiAffinity", 20, "db", ZONE)), {"n2"}),
    ("a placed pod's preferred affinity draws the pod it names",
     [*THREE, pod("fan", node_name="n2", affinity=_prefer_pods("podAffinity", 30, "web"))],
     pod("p", labels=WEB), {"n2"}),
]


@pytest.mark.parametrize(("nodes", "new", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_preference_chooses_the_node(harness_factory: Factory, nodes: list[dict[str, Any]],
                                       new: dict[str, Any], expected: set[str]) -> None:
    h = harness_factory(*nodes, new)
    h.cycle()
    assert h.node_of("p") in expected


@pytest.mark.parametrize("setting", [
    {"preference_tiers": "0"},
    {"disable_plugins": "score-node-affinity"},
])
def test_preferences_can_be_turned_off(harness_factory: Factory, setting: dict[str, str]) -> None:
    """The embedded matcher's ``first`` then takes the lowest rank (Fluxion left out: its
    order among equal nodes is its own)."""
    h = harness_factory(*THREE, pod("p", affinity=_prefer_nodes((10, ZONE, "b"))))
    blocked = ",".join(filter(None, [setting.get("disable_plugins"), "fluxion"]))
    setting = {**setting, "disable_plugins": blocked}
    h.scheduler = Scheduler(h.cluster, load_settings(**setting))
    h.scheduler.start()
    h.cycle()
    assert h.node_of("p") == "n0"


def test_a_gang_sits_wholly_on_its_preferred_nodes_when_they_hold_it(
        harness_factory: Factory) -> None:
    nodes = [_node("n0", "a"), _node("n1", "a"), _node("n2", "b", cpu=2), _node("n3", "b", cpu=2)]
    members = [pod(f"m{i}", "2", group="g", affinity=_prefer_nodes((10, ZONE, "b")))
               for i in range(2)]
    h = harness_factory(*nodes, pod_group("g", 2), *members)
    h.cycle()
    assert sorted(str(h.node_of(f"m{i}")) for i in range(2)) == ["n2", "n3"]


def test_a_gang_its_preferred_nodes_cannot_hold_is_placed_whole_elsewhere(
        harness_factory: Factory) -> None:
    nodes = [_node("n0", "a"), _node("n1", "a"), _node("n2", "b", cpu=2)]
    members = [pod(f"m{i}", "2", group="g", affinity=_prefer_nodes((10, ZONE, "b")))
               for i in range(3)]
    h = harness_factory(*nodes, pod_group("g", 3), *members)
    h.cycle()
    placed = [h.node_of(f"m{i}") for i in range(3)]
    assert None not in placed


def test_a_tier_that_misses_holds_nothing(harness_factory: Factory) -> None:
    """The narrow attempts that miss give back what they took: one allocation remains."""
    nodes = [_node("n0", "a"), _node("n1", "a"), _node("n2", "b", cpu=1)]
    members = [pod(f"m{i}", "2", group="g", affinity=_prefer_nodes((10, ZONE, "b")))
               for i in range(2)]
    h = harness_factory(*nodes, pod_group("g", 2), *members)
    h.cycle()
    assert None not in (h.node_of("m0"), h.node_of("m1"))
    assert len(h.scheduler.view.matcher.allocations()) == 1
