"""kube-scheduler's preference scores, each a case table worked out from its formulas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from fluence_core.feasibility import PodFacts, Snapshot
from fluence_core.feasibility.facts import NodeFacts
from fluence_core.feasibility.scoring import default_normalize, preference_tiers, totals
from fluence_core.feasibility.scoring.inter_pod_affinity import InterPodAffinityScore
from fluence_core.feasibility.scoring.node_affinity import NodeAffinityScore
from fluence_core.feasibility.scoring.pod_topology_spread import PodTopologySpreadScore
from fluence_core.feasibility.scoring.taint_toleration import TaintTolerationScore
from tests.feasibility.kube_objects import facts, node, pod, snapshot, term

HOST = "kubernetes.io/hostname"
ZONE = "zone"
WEB = {"matchLabels": {"app": "web"}}
DB = {"matchLabels": {"app": "db"}}


def _scores(plugin: Any, new: dict[str, Any], snap: Snapshot) -> dict[str, int] | None:
    found = plugin.score(facts(new), snap, snap.nodes)
    return None if found is None else dict(found)


# -- kube-scheduler's DefaultNormalizeScore -------------------------------------------

@pytest.mark.parametrize(("raw", "reverse", "expected"), [
    ({"a": 0, "b": 10}, False, {"a": 0, "b": 100}),
    ({"a": 30, "b": 10, "c": 0}, False, {"a": 100, "b": 33, "c": 0}),  # integer division
    ({"a": 0, "b": 0}, False, {"a": 0, "b": 0}),
    ({"a": 0, "b": 0}, True, {"a": 100, "b": 100}),
    ({"a": 0, "b": 1, "c": 2}, True, {"a": 100, "b": 50, "c": 0}),
])
def test_default_normalize(raw: dict[str, int], reverse: bool, expected: dict[str, int]) -> None:
    assert default_normalize(raw, reverse) == expected


# -- NodeAffinity ---------------------------------------------------------------------

ZONES = [node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b", "ssd": "yes"}),
         node("bare")]


def _preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": t} for w, t in weighted]}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    body: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        body["values"] = list(values)
    return {"matchExpressions": [body]}


@pytest.mark.parametrize(("affinity", "expected"), [
    (None, None),                                                        # Skip
    (_preferred((10, _expr(ZONE, "In", "b"))), {"a1": 0, "b1": 100, "bare": 0}),
    (_preferred((30, _expr(ZONE, "In", "a")), (10, _expr("ssd", "Exists"))),
     {"a1": 100, "b1": 33, "bare": 0}),
    (_preferred((30, _expr(ZONE, "Exists")), (30, _expr("ssd", "Exists"))),
     {"a1": 50, "b1": 100, "bare": 0}),                                  # terms add up
    (_preferred((5, {})), {"a1": 0, "b1": 0, "bare": 0}),                 # empty term: no node
    (_preferred((7, {"matchFields": [{"key": "metadata.name", "operator": "In",
                                      "values": ["bare"]}]})), {"a1": 0, "b1": 0, "bare": 100}),
])
def test_node_affinity_score(affinity: dict[str, Any] | None,
                             expected: dict[str, int] | None) -> None:
    spec = {"affinity": affinity} if affinity else {}
    assert _scores(NodeAffinityScore(), pod("p", **spec), snapshot(ZONES)) == expected


# -- TaintToleration ------------------------------------------------------------------

SOFT = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}
OTHER = {"key": "other", "value": "y", "effect": "PreferNoSchedule"}
HARD = {"key": "hard", "value": "z", "effect": "NoSchedule"}
TAINTED = [node("t0", taints=[HARD]), node("t1", taints=[SOFT]), node("t2", taints=[SOFT, OTHER])]


@pytest.mark.parametrize(("tolerations", "nodes", "expected"), [
    ([], TAINTED, {"t0": 100, "t1": 50, "t2": 0}),
    ([{"key": "soft", "operator": "Exists"}], TAINTED, {"t0": 100, "t1": 100, "t2": 0}),
    ([{"key": "soft", "operator": "Exists", "effect": "PreferNoSchedule"}], TAINTED,
     {"t0": 100, "t1": 100, "t2": 0}),
    # a toleration of another effect does not count for scoring
    ([{"key": "soft", "operator": "Exists", "effect": "NoSchedule"}], TAINTED,
     {"t0": 100, "t1": 50, "t2": 0}),
    ([{"operator": "Exists"}], TAINTED, {"t0": 100, "t1": 100, "t2": 100}),
    ([], [node("t0", taints=[HARD]), node("t1")], None),        # no PreferNoSchedule: Skip
])
def test_taint_toleration_score(tolerations: list[dict[str, str]], nodes: list[dict[str, Any]],
                                expected: dict[str, int] | None) -> None:
    new = pod("p", tolerations=tolerations)
    assert _scores(TaintTolerationScore(), new, snapshot(nodes)) == expected


# -- PodTopologySpread ----------------------------------------------------------------

SPREAD_NODES = [node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}),
                node("b1", labels={ZONE: "b"}), node("nozone")]
PLACED = [pod("w1", labels={"app": "web"}, node_name="a1"),
          pod("w2", labels={"app": "web"}, node_name="a1"),
          pod("w3", labels={"app": "web"}, node_name="b1"),
          pod("d1", labels={"app": "db"}, node_name="a2"),
          pod("x1", namespace="other", labels={"app": "web"}, node_name="a2")]


def _soft(key: str = ZONE, max_skew: int = 1, when: str = "ScheduleAnyway",
          selector: dict[str, Any] | None = WEB) -> dict[str, Any]:
    body: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        body["labelSelector"] = selector
    return body


@pytest.mark.parametrize(("constraints", "expected"), [
    # zones a (2 web), b (1 web): ln(2+2) per pod; a: round(2.77)=3, b: round(1.39)=1;
    # 100*(3+1-s)//3; the node without the key is ignored (0)
    ([_soft()], {"a1": 33, "a2": 33, "b1": 100, "nozone": 0}),
    # hostname: 4 nodes, ln(6) per pod, own pods only: a1 4, a2 0, b1 2, nozone 0
    ([_soft(HOST)], {"a1": 0, "a2": 100, "b1": 50, "nozone": 100}),
    # maxSkew adds maxSkew-1: a 4, b 2 -> 100*(4+2-s)//4
    ([_soft(max_skew=2)], {"a1": 50, "a2": 50, "b1": 100, "nozone": 0}),
    # an empty selector counts no pod: every node ties at maxSkew-1 = 0
    ([_soft(selector={})], {"a1": 100, "a2": 100, "b1": 100, "nozone": 0}),
    ([_soft(when="DoNotSchedule")], None),                       # hard ones are not scored
])
def test_pod_topology_spread_score(constraints: list[dict[str, Any]],
                                   expected: dict[str, int] | None) -> None:
    new = pod("p", labels={"app": "web"}, topologySpreadConstraints=constraints)
    assert _scores(PodTopologySpreadScore(), new, snapshot(SPREAD_NODES, PLACED)) == expected


def test_spread_score_counts_only_nodes_the_pods_node_affinity_admits() -> None:
    """nodeAffinityPolicy Honor (the default): a pod on a node the pod may not use does not
    count toward its domain (w4 on a2 is left out of zone a)."""
    new = pod("p", labels={"app": "web"}, topologySpreadConstraints=[_soft()],
              affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                  "nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "NotIn",
                       "values": ["a2"]}]}]}}})
    snap = snapshot(SPREAD_NODES, [*PLACED, pod("w4", labels={"app": "web"}, node_name="a2")])
    feasible = [n for n in snap.nodes if n.name != "a2"]
    found = PodTopologySpreadScore().score(facts(new), snap, feasible)
    # zones a (2, not 3) and b (1): a1 round(2 ln 4)=3, b1 1 -> 100*(3+1-s)//3
    assert found == {"a1": 33, "b1": 100, "nozone": 0}


# -- InterPodAffinity -----------------------------------------------------------------

AFFINITY_NODES = [node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}),
                  node("b1", labels={ZONE: "b"})]


def _weighted(weight: int, selector: dict[str, Any], key: str) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": term(selector, key)}


def _pod_affinity(prefer: Sequence[dict[str, Any]] = (), avoid: Sequence[dict[str, Any]] = (),
                  require: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if prefer or require:
        body["podAffinity"] = {}
        if prefer:
            body["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = list(prefer)
        if require:
            body["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(require)
    if avoid:
        body["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": list(avoid)}
    return body


DB_ON_A1 = pod("db1", labels={"app": "db"}, node_name="a1")
WEB_ON_B1 = pod("web1", labels={"app": "web"}, node_name="b1")


@pytest.mark.parametrize(("affinity", "placed", "expected"), [
    # nothing anywhere: Skip
    ({}, [DB_ON_A1, WEB_ON_B1], None),
    # the pod prefers a zone with a db: zone a +50
    (_pod_affinity(prefer=[_weighted(50, DB, ZONE)]), [DB_ON_A1, WEB_ON_B1],
     {"a1": 100, "a2": 100, "b1": 0}),
    # the pod avoids a db's host: a1 -20, scaled from the lowest
    (_pod_affinity(avoid=[_weighted(20, DB, HOST)]), [DB_ON_A1, WEB_ON_B1],
     {"a1": 0, "a2": 100, "b1": 100}),
    # both: a1 50-20=30, a2 50, b1 0 -> 100*30/50
    (_pod_affinity(prefer=[_weighted(50, DB, ZONE)], avoid=[_weighted(20, DB, HOST)]),
     [DB_ON_A1, WEB_ON_B1], {"a1": 60, "a2": 100, "b1": 0}),
    # a placed pod's required affinity naming this pod counts 1 for its domain
    ({}, [pod("fan", labels={"app": "fan"}, node_name="b1",
              affinity=_pod_affinity(require=[term(WEB, ZONE)]))],
     {"a1": 0, "a2": 0, "b1": 100}),
    # a placed pod's preferred anti-affinity naming this pod takes from its domain
    ({}, [pod("shy", node_name="a1", affinity=_pod_affinity(avoid=[_weighted(40, WEB, ZONE)]))],
     {"a1": 0, "a2": 0, "b1": 100}),
    # a placed pod's terms that do not name this pod leave every node equal: Skip
    ({}, [pod("shy", node_name="a1", affinity=_pod_affinity(avoid=[_weighted(40, DB, ZONE)]))],
     None),
])
def test_inter_pod_affinity_score(affinity: dict[str, Any], placed: list[dict[str, Any]],
                                  expected: dict[str, int] | None) -> None:
    spec = {"affinity": affinity} if affinity else {}
    new = pod("p", labels={"app": "web"}, **spec)
    assert _scores(InterPodAffinityScore(), new, snapshot(AFFINITY_NODES, placed)) == expected


def test_a_namespace_the_term_does_not_name_is_not_counted() -> None:
    elsewhere = pod("db9", namespace="other", labels={"app": "db"}, node_name="b1")
    new = pod("p", affinity=_pod_affinity(prefer=[_weighted(50, DB, ZONE)]))
    found = _scores(InterPodAffinityScore(), new, snapshot(AFFINITY_NODES, [elsewhere]))
    assert found is None


# -- the weighted sum and the tiers ---------------------------------------------------

class _Fixed:
    """A score plugin with scores given in advance."""

    def __init__(self, name: str, weight: int, scores: dict[str, int] | None) -> None:
        self.name, self.weight, self._scores = name, weight, scores

    def score(self, pod: PodFacts, snapshot: Snapshot,
              nodes: Sequence[NodeFacts]) -> dict[str, int] | None:
        return self._scores


FOUR = snapshot([node("n1"), node("n2"), node("n3"), node("n4")])
P = facts(pod("p"))


@pytest.mark.parametrize(("plugins", "limit", "expected"), [
    ([], 3, ()),
    ([_Fixed("skip", 2, None)], 3, ()),
    # every node equal: nothing to prefer
    ([_Fixed("flat", 2, {"n1": 50, "n2": 50, "n3": 50, "n4": 50})], 3, ()),
    ([_Fixed("one", 2, {"n1": 100, "n2": 0, "n3": 0, "n4": 0})], 3, ({"n1"},)),
    # weighted: n1 2*100=200, n2 3*100=300, n3 2*100+3*100=500, n4 0
    ([_Fixed("x", 2, {"n1": 100, "n2": 0, "n3": 100, "n4": 0}),
      _Fixed("y", 3, {"n1": 0, "n2": 100, "n3": 100, "n4": 0})], 3,
     ({"n3"}, {"n2", "n3"}, {"n1", "n2", "n3"})),
    # the limit keeps the best tiers; the rest is the whole set, tried last
    ([_Fixed("x", 2, {"n1": 100, "n2": 0, "n3": 100, "n4": 0}),
      _Fixed("y", 3, {"n1": 0, "n2": 100, "n3": 100, "n4": 0})], 1, ({"n3"},)),
    ([_Fixed("one", 2, {"n1": 100, "n2": 0, "n3": 0, "n4": 0})], 0, ()),
])
def test_preference_tiers(plugins: list[_Fixed], limit: int,
                          expected: tuple[set[str], ...]) -> None:
    tiers = preference_tiers(P, FOUR, FOUR.nodes, plugins, limit)
    assert tiers == tuple(frozenset(t) for t in expected)


def test_totals_add_each_plugins_weighted_scores() -> None:
    plugins = [_Fixed("x", 2, {"n1": 100, "n2": 50, "n3": 0, "n4": 0}),
               _Fixed("skip", 5, None), _Fixed("y", 3, {"n1": 0, "n2": 10, "n3": 0, "n4": 100})]
    assert totals(P, FOUR, FOUR.nodes, plugins) == {"n1": 200, "n2": 130, "n3": 0, "n4": 300}


@pytest.mark.parametrize(("affinity", "message"), [
    (_preferred((0, _expr(ZONE, "In", "a"))), "nodeAffinity.preferred[0].weight"),
    (_preferred((101, _expr(ZONE, "In", "a"))), "must be an integer in 1-100"),
    ({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": {"labelSelector": WEB}}]}},
     "podAffinity.preferred[0].podAffinityTerm: topologyKey is required"),
    ({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["x"]}},
     "podAntiAffinity.preferred[0]: expected a weighted pod affinity term"),
])
def test_a_bad_preferred_term_is_refused_naming_where(affinity: dict[str, Any],
                                                      message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        facts(pod("p", affinity=affinity))
