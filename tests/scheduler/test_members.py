"""A gang whose members constrain each other is placed member by member, all or nothing."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from fluence_core import names
from fluence_core.kube.api import PODS
from fluence_core.feasibility import PodFacts
from fluence_core.scheduler.members import entangled
from fluence_core.testing import make_pod_dict
from tests.scheduler.conftest import Harness, node, pod_group

Factory = Callable[..., Harness]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
FPGA = "example.com/fpga"
GANG = {"gang": "g"}


def _node(name: str, zone: str = "a", cpu: int = 4, **allocatable: str) -> dict[str, Any]:
    """A node of ``zone``, labelled with its hostname as the kubelet does."""
    return node(name, cpu, hostname=True, zone=zone, **allocatable)


def _member(name: str, cpu: str = "1", labels: dict[str, str] | None = None,
            requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return make_pod_dict(name, cpu, extra=requests, group="g",
                         labels=GANG if labels is None else labels, **spec)


def _required(kind: str, key: str = HOST) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": GANG}, "topologyKey": key}]}}


def _gang(h: Harness, count: int) -> list[str | None]:
    return [h.node_of(f"m{i}") for i in range(count)]


def _reason(h: Harness, name: str) -> str:
    found = h.cluster.get(PODS, name, "default")
    assert found is not None
    conditions = (found.get("status") or {}).get("conditions") or []
    return str(next(c["message"] for c in conditions if c["type"] == "PodScheduled"))


def _held(h: Harness) -> int:
    return len(h.scheduler.view.matcher.allocations())


# -- which groups are placed member by member ------------------------------------------

def _facts(**spec: Any) -> PodFacts:
    return PodFacts.from_kube(_member("m", **spec))


def _ns(namespace: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": namespace}


PORT = [{"name": "app", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}]


@pytest.mark.parametrize(("members", "why"), [
    ([_facts()], None),                                                 # a group of one
    ([_facts(), _facts()], None),                                       # nothing between them
    ([_facts(affinity=_required("podAntiAffinity"))] * 2, "pod affinity term"),
    ([_facts(affinity=_required("podAffinity", ZONE))] * 2, "pod affinity term"),
    # a term naming only other pods than the gang's
    ([_facts(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST}]}})] * 2, None),
    # a term naming the member's own kind, when the gang holds one of that kind only
    ([_facts(labels={"role": "a"}, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"role": "a"}}, "topologyKey": HOST}]}}),
      _facts(labels={"role": "b"})], None),
    ([_facts(affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": GANG},
                                          "topologyKey": HOST}}]}})] * 2, "pod affinity term"),
    ([_facts(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": HOST,
                                         "whenUnsatisfiable": "ScheduleAnyway",
                                         "labelSelector": {"matchLabels": GANG}}])] * 2,
     "topology spread"),
    ([_facts(requests={FPGA: "1"})] * 2, "extended resources"),
    ([_facts(containers=PORT)] * 2, "host ports"),
])
def test_entangled(members: list[PodFacts], why: str | None) -> None:
    found = entangled(members, _ns)
    assert (found is None) if why is None else (found is not None and why in found)


# -- anti-affinity between members -------------------------------------------------------

ONE_PER_NODE = _required("podAntiAffinity")


def test_a_gang_with_anti_affinity_on_its_own_label_lands_on_distinct_nodes(
        harness_factory: Factory) -> None:
    members = [_member(f"m{i}", affinity=ONE_PER_NODE) for i in range(4)]
    h = harness_factory(*(_node(f"n{i}") for i in range(4)), pod_group("g", 4), *members)
    h.cycle()
    placed = _gang(h, 4)
    assert sorted(str(n) for n in placed) == ["n0", "n1", "n2", "n3"]


def test_a_gang_with_anti_affinity_and_too_few_nodes_is_not_placed_at_all(
        harness_factory: Factory) -> None:
    members = [_member(f"m{i}", affinity=ONE_PER_NODE) for i in range(4)]
    h = harness_factory(*(_node(f"n{i}") for i in range(3)), pod_group("g", 4), *members)
    h.cycle()
    assert _gang(h, 4) == [None] * 4
    assert _held(h) == 0
    assert "didn't match pod anti-affinity rules" in _reason(h, "m0")


def test_zone_anti_affinity_puts_each_member_in_its_own_zone(harness_factory: Factory) -> None:
    members = [_member(f"m{i}", affinity=_required("podAntiAffinity", ZONE)) for i in range(2)]
    nodes = [_node("a0", "a"), _node("a1", "a"), _node("b0", "b")]
    h = harness_factory(*nodes, pod_group("g", 2), *members)
    h.cycle()
    placed = _gang(h, 2)
    assert None not in placed and {str(n)[0] for n in placed} == {"a", "b"}


# -- affinity between members ------------------------------------------------------------

def test_a_gang_with_affinity_to_itself_shares_one_zone_that_can_hold_it(
        harness_factory: Factory) -> None:
    """Zone a (first in rank order) holds one member only: the first member's first choice
    is given up and the gang goes to zone b together."""
    members = [_member(f"m{i}", "3", affinity=_required("podAffinity", ZONE)) for i in range(2)]
    nodes = [_node("a0", "a"), _node("b0", "b"), _node("b1", "b")]
    h = harness_factory(*nodes, pod_group("g", 2), *members)
    h.cycle()
    assert sorted(str(n) for n in _gang(h, 2)) == ["b0", "b1"]


def test_a_gang_with_affinity_no_zone_can_hold_waits_whole(harness_factory: Factory) -> None:
    members = [_member(f"m{i}", "3", affinity=_required("podAffinity", ZONE)) for i in range(2)]
    nodes = [_node("a0", "a"), _node("b0", "b")]
    h = harness_factory(*nodes, pod_group("g", 2), *members)
    h.cycle()
    assert _gang(h, 2) == [None, None] and _held(h) == 0


# -- resources only the filters count ----------------------------------------------------

@pytest.mark.parametrize(("fpgas", "placed"), [
    (["1", "1"], {"n0", "n1"}),     # one each: the members must part
    (["2", "0"], {"n0"}),           # one node holds both
    (["1", "0"], None),             # not enough in all: nothing is placed
])
def test_an_extended_resource_is_counted_for_the_whole_gang(
        harness_factory: Factory, fpgas: list[str], placed: set[str] | None) -> None:
    nodes = [_node(f"n{i}", **({FPGA: n} if n != "0" else {})) for i, n in enumerate(fpgas)]
    members = [_member(f"m{i}", requests={FPGA: "1"}) for i in range(2)]
    h = harness_factory(*nodes, pod_group("g", 2), *members)
    h.cycle()
    found = _gang(h, 2)
    if placed is None:
        assert found == [None, None] and _held(h) == 0
        assert "Insufficient example.com/fpga" in _reason(h, "m1")
    else:
        assert None not in found and {str(n) for n in found} == placed


def test_host_ports_keep_members_apart(harness_factory: Factory) -> None:
    members = [_member(f"m{i}", containers=[{
        "name": "app", "image": "x", "resources": {"requests": {"cpu": "1"}},
        "ports": [{"containerPort": 80, "hostPort": 8080}]}]) for i in range(2)]
    h = harness_factory(_node("n0"), _node("n1"), pod_group("g", 2), *members)
    h.cycle()
    assert sorted(str(n) for n in _gang(h, 2)) == ["n0", "n1"]


# -- preferences between members ---------------------------------------------------------

def test_schedule_anyway_spread_between_members_spreads_the_gang(harness_factory: Factory) -> None:
    """Each member sees those before it, as under kube-scheduler; matched jointly, the
    embedded matcher's ``first`` policy would have packed all three on n0."""
    spread = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": GANG}}]
    members = [_member(f"m{i}", topologySpreadConstraints=spread) for i in range(3)]
    h = harness_factory(*(_node(f"n{i}") for i in range(3)), pod_group("g", 3), *members)
    h.cycle()
    assert sorted(str(n) for n in _gang(h, 3)) == ["n0", "n1", "n2"]


def test_a_gang_whose_members_ignore_each_other_is_still_matched_jointly(
        harness_factory: Factory) -> None:
    members = [_member(f"m{i}") for i in range(3)]
    h = harness_factory(*(_node(f"n{i}") for i in range(3)), pod_group("g", 3), *members)
    h.cycle()
    assert None not in _gang(h, 3) and len(h.scheduler.view.matcher.allocations()) == 1


def test_a_gang_placed_member_by_member_is_restored_after_a_restart(
        harness_factory: Factory) -> None:
    """Its record holds one allocation per member; a restarted scheduler holds them all
    again and places nothing twice."""
    members = [_member(f"m{i}", affinity=ONE_PER_NODE) for i in range(3)]
    h = harness_factory(*(_node(f"n{i}") for i in range(3)), pod_group("g", 3), *members)
    h.cycle()
    before = _gang(h, 3)
    assert sorted(str(n) for n in before) == ["n0", "n1", "n2"]
    h.restart()
    h.cycle()
    assert _gang(h, 3) == before and _held(h) == 3


# -- a gang that requires a topology level -----------------------------------------------------

ZONE_LEVEL = f"topology:\n  levels: [{ZONE}]\n"


def test_an_entangled_gang_requiring_a_zone_is_placed_member_by_member_inside_one(
        harness_factory: Factory) -> None:
    members = [_member(f"m{i}", affinity=ONE_PER_NODE) for i in range(3)]
    nodes = [_node("a0", "a"), _node("a1", "a"), *(_node(f"b{i}", "b") for i in range(3))]
    h = harness_factory(*nodes, pod_group("g", 3, topology=[ZONE]), *members,
                        resources=ZONE_LEVEL)
    h.cycle()
    assert sorted(str(n) for n in _gang(h, 3)) == ["b0", "b1", "b2"]


def test_an_entangled_gang_no_zone_can_hold_waits_holding_nothing(
        harness_factory: Factory) -> None:
    members = [_member(f"m{i}", affinity=ONE_PER_NODE) for i in range(3)]
    nodes = [_node("a0", "a"), _node("a1", "a"), _node("b0", "b"), _node("b1", "b")]
    h = harness_factory(*nodes, pod_group("g", 3, topology=[ZONE]), *members,
                        resources=ZONE_LEVEL)
    h.cycle()
    assert _gang(h, 3) == [None] * 3 and _held(h) == 0


def test_a_gang_requiring_a_zone_that_cannot_fit_says_which_zone_is_best_and_what_it_lacks(
        harness_factory: Factory) -> None:
    members = [_member(f"m{i}", cpu="4") for i in range(3)]
    nodes = [_node("a0", "a"), _node("a1", "a"), _node("b0", "b")]
    h = harness_factory(*nodes, pod_group("g", 3, topology=[ZONE]), *members,
                        resources=ZONE_LEVEL)
    h.cycle()
    assert _gang(h, 3) == [None] * 3
    reason = _reason(h, "m0")
    assert f"must stay inside one zone ({ZONE})" in reason
    assert "the best zone is a with 8 cores free on 2 nodes: it lacks 4 cores" in reason


def test_an_entangled_gang_requiring_a_label_that_is_no_level_stays_inside_one_of_its_domains(
        harness_factory: Factory) -> None:
    # no levels configured: the zone label is only a node label here, as kube-scheduler
    # reads any topology key; zone a (listed first) has two nodes, b three
    members = [_member(f"m{i}", affinity=ONE_PER_NODE) for i in range(3)]
    nodes = [_node("a0", "a"), _node("a1", "a"), *(_node(f"b{i}", "b") for i in range(3))]
    h = harness_factory(*nodes, pod_group("g", 3, topology=[ZONE]), *members)
    h.cycle()
    assert sorted(str(n) for n in _gang(h, 3)) == ["b0", "b1", "b2"]


def test_an_entangled_sliced_gang_waits_saying_slices_are_not_kept_member_by_member(
        harness_factory: Factory) -> None:
    slices = {names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: ZONE,
              names.KUEUE_SLICE_SIZE_ANNOTATION: "1"}
    members = [_member(f"m{i}", affinity=ONE_PER_NODE, annotations=slices) for i in range(2)]
    h = harness_factory(_node("a0", "a"), _node("a1", "a"), pod_group("g", 2), *members)
    h.cycle()
    assert _gang(h, 2) == [None, None] and _held(h) == 0
    assert "slices are not kept that way" in _reason(h, "m0")
