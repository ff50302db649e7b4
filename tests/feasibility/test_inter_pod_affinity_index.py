"""InterPodAffinity read from the counts per domain answers as the rule read pod by pod.

The reference below is the rule as written (and as the filter computed it before the
index): every placed pod's anti-affinity terms against the new pod, and the new pod's
terms against every placed pod. Random clusters (nodes with and without the topology
keys, pods in two namespaces with few labels, terms with and without selectors and
namespace lists) must get the same verdict on every node, also after pods are removed
from a snapshot that counted them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fluence_core.feasibility import NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.inter_pod_affinity import (
    AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, InterPodAffinity, term_matches,
)
from fluence_core.feasibility.affinity_index import AffinityIndex
from tests.feasibility.kube_objects import affinity, node, pod, term

ZONE = "zone"
HOST = "kubernetes.io/hostname"
NAMESPACES = [{"metadata": {"name": "prod", "labels": {"env": "prod"}}},
              {"metadata": {"name": "dev", "labels": {"env": "dev"}}}]


def reference(new: PodFacts, snap: Snapshot, candidate: NodeFacts) -> tuple[str, ...]:
    """InterPodAffinity's verdict on one node, asking every placed pod."""
    def labels_of(other: PodFacts) -> dict[str, str]:
        found = snap.node(other.node_name)
        return dict(found.labels) if found is not None else {}

    def named(t: Any, other: PodFacts) -> bool:
        return term_matches(t, other, snap.namespace_labels(other.namespace))

    affinity_at: Counter[tuple[str, str]] = Counter()
    anti_at: Counter[tuple[str, str]] = Counter()
    existing_at: Counter[tuple[str, str]] = Counter()
    for other in snap.pods:
        labels = labels_of(other)
        for t in other.anti_affinity:
            if t.topology_key in labels and named(t, new):
                existing_at[(t.topology_key, labels[t.topology_key])] += 1
        if new.affinity and all(named(t, other) for t in new.affinity):
            for t in new.affinity:
                if t.topology_key in labels:
                    affinity_at[(t.topology_key, labels[t.topology_key])] += 1
        for t in new.anti_affinity:
            if named(t, other) and t.topology_key in labels:
                anti_at[(t.topology_key, labels[t.topology_key])] += 1
    self_affine = bool(new.affinity) and all(named(t, new) for t in new.affinity)
    labels = candidate.labels
    found = True
    for t in new.affinity:
        if t.topology_key not in labels:
            return (AFFINITY,)
        if affinity_at[(t.topology_key, labels[t.topology_key])] <= 0:
            found = False
    if not found and not (not affinity_at and self_affine):
        return (AFFINITY,)
    for t in new.anti_affinity:
        if t.topology_key in labels and anti_at[(t.topology_key, labels[t.topology_key])] > 0:
            return (ANTI_AFFINITY,)
    if any(existing_at[d] > 0 for d in labels.items()):
        return (EXISTING_ANTI_AFFINITY,)
    return ()


def verdicts(new: PodFacts, snap: Snapshot) -> dict[str, tuple[str, ...]]:
    check = InterPodAffinity().prepare(new, snap)
    return {n.name: (tuple(check(n)) if check is not None else ()) for n in snap.nodes}


selectors = st.sampled_from([
    None, {}, {"matchLabels": {"app": "db"}}, {"matchLabels": {"app": "web"}},
    {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
])
keys = st.sampled_from([ZONE, HOST, "rack"])
extras = st.sampled_from([{}, {"namespaces": ["prod"]}, {"namespaces": ["dev", "prod"]},
                          {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
                          {"namespaceSelector": {}}])
terms = st.builds(lambda s, k, e: term(s, k, **e), selectors, keys, extras)
labels = st.one_of(st.just({"app": "db"}), st.dictionaries(
    st.sampled_from(["app", "tier"]), st.sampled_from(["db", "web", "x"]), max_size=2))


@st.composite
def pods(draw: Any, name: str, node_names: list[str] | None, least: int = 0) -> dict[str, Any]:
    own = draw(st.lists(terms, max_size=2))
    anti = draw(st.lists(terms, min_size=least, max_size=2))
    spec: dict[str, Any] = {}
    if own or anti:
        spec["affinity"] = affinity(pod_affinity=own, anti=anti)
    where = draw(st.sampled_from(node_names)) if node_names else ""
    return pod(name, namespace=draw(st.sampled_from(["prod", "dev"])), labels=draw(labels),
               node_name=where, **spec)


@st.composite
def clusters(draw: Any, least: int = 0,
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    count = draw(st.integers(1, 6))
    nodes = []
    for i in range(count):
        node_labels = {}
        if draw(st.booleans()):
            node_labels[ZONE] = draw(st.sampled_from(["a", "b"]))
        if draw(st.booleans()):
            node_labels["rack"] = draw(st.sampled_from(["r1", "r2", "r3"]))
        nodes.append(node(f"n{i}", labels=node_labels))
    names = [n["metadata"]["name"] for n in nodes]
    placed = [draw(pods(f"p{i}", names)) for i in range(draw(st.integers(0, 8)))]
    return nodes, placed, draw(pods("new", None, least))


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_the_counts_per_domain_give_the_verdict_of_every_placed_pod_asked(
        cluster: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]) -> None:
    nodes, placed, new = cluster
    snap = Snapshot.from_kube(nodes, placed, namespaces=NAMESPACES)
    facts = PodFacts.from_kube(new)
    assert verdicts(facts, snap) == {n.name: reference(facts, snap, n) for n in snap.nodes}


@settings(max_examples=200, deadline=None)
@given(clusters(least=1), st.data())
def test_the_counts_follow_pods_removed_from_the_snapshot(
        cluster: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]],
        data: st.DataObject) -> None:
    nodes, placed, new = cluster
    snap = Snapshot.from_kube(nodes, placed, namespaces=NAMESPACES)
    facts = PodFacts.from_kube(new)
    verdicts(facts, snap)  # the counts per key of pods alike are made now: must follow removals
    for gone in data.draw(st.lists(st.sampled_from(snap.pods), unique_by=id)) if snap.pods else []:
        snap.remove(gone)
    assert verdicts(facts, snap) == {n.name: reference(facts, snap, n) for n in snap.nodes}


def test_a_term_whose_last_pod_left_is_no_longer_counted() -> None:
    index = AffinityIndex()
    guard = PodFacts.from_kube(pod("guard", node_name="n0", affinity=affinity(
        anti=[term({"matchLabels": {"app": "web"}}, ZONE)])))
    node_labels = {ZONE: "a"}
    index.add(guard.namespace, guard.labels, guard.anti_affinity, "n0", node_labels)
    assert [dict(c) for c in index.anti_terms.values()] == [{"a": 1}]
    index.remove(guard.namespace, guard.labels, guard.anti_affinity, "n0", node_labels)
    assert index.anti_terms == {} and list(index.pods_alike()) == []


def test_many_matching_groups_of_pods_alike_are_merged_into_one_lookup_per_key() -> None:
    placed = [pod(f"db{i}", labels={"app": "db", "tier": str(i)}, node_name=f"n{i % 3}")
              for i in range(12)]
    nodes = [node(f"n{i}") for i in range(5)]
    snap = Snapshot.from_kube(nodes, placed)
    new = PodFacts.from_kube(pod("web", affinity=affinity(
        anti=[term({"matchLabels": {"app": "db"}}, HOST)])))
    assert verdicts(new, snap) == {"n0": (ANTI_AFFINITY,), "n1": (ANTI_AFFINITY,),
                                   "n2": (ANTI_AFFINITY,), "n3": (), "n4": ()}
