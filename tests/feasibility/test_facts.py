"""fluence_core.feasibility.facts: pods and nodes read once, bad input named."""

from __future__ import annotations

import dataclasses

import pytest

from fluence_core.feasibility import NodeFacts, PodFacts
from fluence_core.feasibility.facts import HostPort, Toleration
from tests.feasibility.kube_objects import facts, node, pod, snapshot


def test_pod_facts_read_every_field_the_filters_use() -> None:
    raw = pod("p", namespace="ns", labels={"app": "x"}, cpu="250m",
              tolerations=[{"key": "k", "operator": "Exists"}], nodeSelector={"zone": "a"},
              containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                           "resources": {"requests": {"cpu": "250m"}}}],
              volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}])
    facts = PodFacts.from_kube(raw)
    assert facts.key == "ns/p" and facts.labels == {"app": "x"}
    assert facts.requests == {"cpu": 250}
    assert facts.tolerations == (Toleration("k", "Exists", "", ""),)
    assert facts.node_selector == {"zone": "a"}
    assert facts.host_ports == (HostPort("0.0.0.0", "TCP", 8080),)
    assert facts.claims == ("data",)


def test_affinity_terms_default_to_the_pods_namespace() -> None:
    raw = pod("p", namespace="ns", affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}})
    assert PodFacts.from_kube(raw).affinity[0].namespaces == frozenset({"ns"})


PREFERRING = {"affinity": {
    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}}]},
    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 7, "podAffinityTerm": {"topologyKey": "zone"}}]}}}


def test_a_pod_without_affinity_has_every_affinity_field_empty() -> None:
    plain = PodFacts.from_kube(pod("p", cpu="1"))
    assert plain.required_node_affinity is None
    assert not (plain.affinity or plain.anti_affinity or plain.preferred_node_affinity
                or plain.preferred_affinity or plain.preferred_anti_affinity)
    preferring = PodFacts.from_kube(pod("q", cpu="1", **PREFERRING))
    assert [t.weight for t in preferring.preferred_node_affinity] == [5]
    assert [t.weight for t in preferring.preferred_anti_affinity] == [7]


def test_pods_alike_but_for_their_names_share_a_signature_and_nothing_else_does() -> None:
    first, second = (PodFacts.from_kube(pod(n, cpu="1")) for n in ("a", "b"))
    assert first.signature() == second.signature()
    for other in (pod("a", cpu="2"), pod("a", cpu="1", namespace="ns"),
                  pod("a", cpu="1", labels={"app": "x"}), pod("a", cpu="1", **PREFERRING)):
        assert PodFacts.from_kube(other).signature() != first.signature()
    assert first.on("n1").signature() != first.signature()


def test_a_pod_on_a_node_is_the_pod_with_that_node_and_nothing_else_changed() -> None:
    facts = PodFacts.from_kube(pod("p", cpu="1", labels={"app": "x"}, **PREFERRING))
    assert facts.on("n1") == dataclasses.replace(facts, node_name="n1")


@pytest.mark.parametrize(("spec", "message"), [
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}},
     r"pod default/p: podAffinity\.required\[0\]: topologyKey is required"),
    ({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone"}]},
     r"topologySpreadConstraints\[0\]: maxSkew must be at least 1"),
    ({"topologySpreadConstraints": [{"maxSkew": "x", "topologyKey": "zone"}]},
     r"maxSkew must be an integer"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "Near"}]}]}}}},
     r"pod default/p: nodeAffinity\.required\.nodeSelectorTerms\[0\]"),
    ({"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
     r"pod default/p: spec\.containers\[0\]\.resources\.requests\.cpu"),
    ({"containers": [{"name": "c", "ports": [{"hostPort": "80"}]}]},
     r"hostPort '80' is not a port number"),
])
def test_bad_pods_are_named_with_the_field(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PodFacts.from_kube(pod("p", **spec))


def test_node_facts_count_allocatable_in_base_units() -> None:
    facts = NodeFacts.from_kube(node("n", cpu="7500m", memory="1Ki", pods="10",
                                     extra={"nvidia.com/gpu": "2"}))
    assert facts.allocatable == {"cpu": 7500, "memory": 1024, "pods": 10, "nvidia.com/gpu": 2}
    assert facts.max_pods == 10


def test_a_node_with_a_bad_quantity_is_named() -> None:
    with pytest.raises(ValueError, match="node n: allocatable: memory"):
        NodeFacts.from_kube(node("n", memory="lots"))


def test_a_snapshot_forgets_a_removed_pod_everywhere_it_counted_it() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}
    first, second, third = (facts(pod(n, node_name="n0", labels={"app": "a"})) for n in "abc")
    wary = facts(pod("d", node_name="n1", labels={"app": "a"}, affinity=anti))
    taken = snapshot([node("n0"), node("n1")])
    for counted in (first, second, third, wary):
        taken.add(counted)
    taken.remove(first)
    taken.remove(wary)
    taken.remove(wary)  # a second removal changes nothing
    assert sorted(p.name for p in taken.pods) == ["b", "c"]
    assert [p.name for p in taken.pods_on("n0")] == ["b", "c"] and taken.pods_on("n1") == []
    assert taken.affinity_index.anti_terms == {}  # the wary pod's term no longer counts
    taken.add(first)
    assert sorted(p.name for p in taken.pods) == ["a", "b", "c"]
