"""PodTopologySpread: DoNotSchedule constraints, counted as kube-scheduler counts domains."""

from __future__ import annotations

from typing import Any

from fluence_core.feasibility.pod_topology_spread import MISSING_LABEL, REASON, PodTopologySpread
from tests.feasibility.kube_objects import node, pod, refusals, snapshot

ZONE = "zone"
WEB = {"matchLabels": {"app": "web"}}


def _spread(max_skew: int = 1, key: str = ZONE, when: str = "DoNotSchedule",
            selector: dict[str, Any] | None = WEB, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        **extra,
    }
    if selector is not None:
        body["labelSelector"] = selector
    return body


def _web(name: str, node_name: str = "", **extra: Any) -> dict[str, Any]:
    return pod(name, labels={"app": "web"}, node_name=node_name, **extra)


def _fine(result: dict[str, tuple[str, ...]]) -> set[str]:
    return {n for n, reasons in result.items() if not reasons}


NODES = [node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}),
         node("b1", labels={ZONE: "b"}), node("nozone")]


def _run(new: dict[str, Any], existing: list[dict[str, Any]],
         nodes: list[dict[str, Any]] = NODES) -> dict[str, tuple[str, ...]]:
    return refusals(PodTopologySpread(), new, snapshot(nodes, existing))


def test_a_pod_goes_to_the_emptier_zone() -> None:
    result = _run(_web("w2", topologySpreadConstraints=[_spread()]), [_web("w1", "a1")])
    assert _fine(result) == {"b1"}
    assert result["a1"] == (REASON,) and result["a2"] == (REASON,)
    assert result["nozone"] == (MISSING_LABEL,)


def test_max_skew_allows_that_much_imbalance() -> None:
    result = _run(_web("w2", topologySpreadConstraints=[_spread(max_skew=2)]), [_web("w1", "a1")])
    assert _fine(result) == {"a1", "a2", "b1"}


def test_schedule_anyway_never_refuses() -> None:
    result = _run(_web("w2", topologySpreadConstraints=[_spread(when="ScheduleAnyway")]),
                  [_web("w1", "a1")])
    assert _fine(result) == {"a1", "a2", "b1", "nozone"}


def test_a_pod_not_matching_its_own_selector_does_not_add_to_the_skew() -> None:
    new = pod("other", topologySpreadConstraints=[_spread()])
    assert _fine(_run(new, [_web("w1", "a1")])) == {"a1", "a2", "b1"}


def test_other_namespaces_and_terminating_pods_do_not_count() -> None:
    existing = [_web("w1", "a1", namespace="other"),
                {**_web("w3", "a2"), "metadata": {"name": "w3", "namespace": "default",
                                                  "labels": {"app": "web"},
                                                  "deletionTimestamp": "2026-01-01T00:00:00Z"}}]
    assert _fine(_run(_web("w2", topologySpreadConstraints=[_spread()]), existing)) == {
        "a1",
        "a2",
        "b1",
    }


def test_min_domains_makes_the_minimum_zero_while_domains_are_too_few() -> None:
    existing = [_web("w1", "a1"), _web("w2", "b1")]
    plain = _run(_web("w3", topologySpreadConstraints=[_spread()]), existing)
    assert _fine(plain) == {"a1", "a2", "b1"}
    needs_three = _run(_web("w3", topologySpreadConstraints=[_spread(minDomains=3)]), existing)
    assert _fine(needs_three) == set()


def test_node_affinity_policy_decides_which_domains_count() -> None:
    # The pod may only use zone b; zone a holds none of its pods, c holds one.
    nodes = [node("a1", labels={ZONE: "a", "pool": "x"}), node("b1", labels={ZONE: "b"}),
             node("c1", labels={ZONE: "c"})]
    existing = [_web("w1", "c1"), _web("w2", "b1")]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "DoesNotExist"}]}]}}}
    honour = _web("w3", affinity=affinity, topologySpreadConstraints=[_spread()])
    assert _fine(_run(honour, existing, nodes)) == {"a1", "b1", "c1"}      # a is left out: min 1
    ignore = _web("w3", affinity=affinity,
                  topologySpreadConstraints=[_spread(nodeAffinityPolicy="Ignore")])
    assert _fine(_run(ignore, existing, nodes)) == {"a1"}                 # a counts: min 0


def test_node_taints_policy_honour_leaves_untolerated_nodes_out() -> None:
    nodes = [
        node("a1", labels={ZONE: "a"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("b1", labels={ZONE: "b"}),
    ]
    existing = [_web("w1", "b1")]
    ignore = _run(_web("w2", topologySpreadConstraints=[_spread()]), existing, nodes)
    assert _fine(ignore) == {"a1"}
    honour = _run(_web("w2", topologySpreadConstraints=[_spread(nodeTaintsPolicy="Honor")]),
                  existing, nodes)
    assert _fine(honour) == {"a1", "b1"}


def test_match_label_keys_narrow_the_selector_to_the_pods_own_values() -> None:
    existing = [pod("old", labels={"app": "web", "rev": "1"}, node_name="a1")]
    new = pod("new", labels={"app": "web", "rev": "2"},
              topologySpreadConstraints=[_spread(matchLabelKeys=["rev"])])
    assert _fine(_run(new, existing)) == {"a1", "a2", "b1"}


def test_an_empty_selector_counts_no_pod_but_the_pod_itself() -> None:
    result = _run(_web("w2", topologySpreadConstraints=[_spread(selector={})]), [_web("w1", "a1")])
    assert _fine(result) == {"a1", "a2", "b1"}


def test_hostname_spread_is_per_node() -> None:
    new = _web("w3", topologySpreadConstraints=[_spread(key="kubernetes.io/hostname")])
    result = _run(new, [_web("w1", "a1"), _web("w2", "a2")])
    assert _fine(result) == {"b1", "nozone"}


def test_counts_kept_as_pods_come_and_go_answer_as_a_fresh_count_does() -> None:
    from fluence_core.feasibility.facts import PodFacts

    kept = snapshot(NODES, [_web("w1", "a1")])
    new = _web("w9", topologySpreadConstraints=[_spread()])
    assert _fine(refusals(PodTopologySpread(), new, kept)) == {"b1"}  # counts made here
    arrivals = [PodFacts.from_kube(_web(f"w{i}", n)) for i, n in ((2, "b1"), (3, "b1"),
                                                                  (4, "a2"))]
    for facts in arrivals:
        kept.add(facts)
    kept.remove(arrivals[2])
    fresh = snapshot(NODES, [_web("w1", "a1"), _web("w2", "b1"), _web("w3", "b1")])
    assert refusals(PodTopologySpread(), new, kept) == refusals(PodTopologySpread(), new, fresh)
    assert _fine(refusals(PodTopologySpread(), new, kept)) == {"a1", "a2"}
