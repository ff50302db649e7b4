"""InterPodAffinity: required pod affinity and anti-affinity, the pod's own and the others'.

Three rules, each over topology domains (a node label's key and value):

* the pod's **affinity**: every term's topology key must be on the node, and the
  node's domain must hold a pod matching *all* the pod's affinity terms; if no
  pod anywhere matches them but the pod matches them itself, any node carrying
  the keys will do (the first pod of a group with affinity to itself);
* the pod's **anti-affinity**: no pod matching a term may be in the node's domain
  for that term's key;
* **other pods' anti-affinity**: no pod whose anti-affinity term matches this pod
  may be in a domain the node belongs to.

A term matches a pod when the pod's namespace is listed (the term owner's own
namespace when nothing is said) or its labels match the namespace selector,
and the pod's labels match the label selector.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from fluence_core import hookimpl
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.objects import AffinityTerm, NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.selectors import matches
from fluence_core.settings import Settings

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Domain = tuple[str, str]


def term_matches(term: AffinityTerm, pod: PodFacts, namespace_labels: Mapping[str, str]) -> bool:
    """Whether ``pod`` (whose namespace carries ``namespace_labels``) is what ``term`` names."""
    in_namespace = pod.namespace in term.namespaces or (
        term.namespace_selector is not None and term.namespace_selector.matches(namespace_labels))
    return in_namespace and matches(term.selector, pod.labels)


def _matcher(snapshot: Snapshot) -> Callable[[AffinityTerm, PodFacts], bool]:
    return lambda term, pod: term_matches(term, pod, snapshot.namespace_labels(pod.namespace))


def _labels_of(snapshot: Snapshot, pod: PodFacts) -> Mapping[str, str]:
    node = snapshot.node(pod.node_name)
    return node.labels if node is not None else {}


class InterPodAffinity:
    name = "InterPodAffinity"
    reads_pods = True

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        match = _matcher(snapshot)
        affinity: Counter[Domain] = Counter()
        anti: Counter[Domain] = Counter()
        existing_anti: Counter[Domain] = Counter()
        own_labels = snapshot.namespace_labels(pod.namespace)
        for other in snapshot.anti_affine:
            labels = _labels_of(snapshot, other)
            for term in other.anti_affinity:
                if term.topology_key in labels and term_matches(term, pod, own_labels):
                    existing_anti[(term.topology_key, labels[term.topology_key])] += 1
        if pod.affinity or pod.anti_affinity:
            named: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[bool, tuple[bool, ...]]] = {}
            """What the pod's terms say of a placed pod, by its namespace and labels: the placed
            pods of one workload look alike, and a term's answer depends on nothing else."""
            for other in snapshot.pods:
                look = (other.namespace, tuple(other.labels.items()))
                said = named.get(look)
                if said is None:
                    said = named[look] = (
                        bool(pod.affinity) and all(match(t, other) for t in pod.affinity),
                        tuple(match(t, other) for t in pod.anti_affinity))
                if not (said[0] or any(said[1])):
                    continue
                labels = _labels_of(snapshot, other)
                if said[0]:
                    for term in pod.affinity:
                        if term.topology_key in labels:
                            affinity[(term.topology_key, labels[term.topology_key])] += 1
                for term, hit in zip(pod.anti_affinity, said[1]):
                    if hit and term.topology_key in labels:
                        anti[(term.topology_key, labels[term.topology_key])] += 1
        if not (pod.affinity or pod.anti_affinity or existing_anti):
            return None
        self_affine = bool(pod.affinity) and all(match(t, pod) for t in pod.affinity)

        def check(node: NodeFacts) -> tuple[str, ...]:
            labels = node.labels
            found = True
            for term in pod.affinity:
                if term.topology_key not in labels:
                    return (AFFINITY,)
                if affinity[(term.topology_key, labels[term.topology_key])] <= 0:
                    found = False
            if not found and not (not affinity and self_affine):
                return (AFFINITY,)
            for term in pod.anti_affinity:
                key = term.topology_key
                if key in labels and anti[(key, labels[key])] > 0:
                    return (ANTI_AFFINITY,)
            if existing_anti and any(existing_anti[d] > 0 for d in labels.items()):
                return (EXISTING_ANTI_AFFINITY,)
            return FINE

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in InterPodAffinity filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [InterPodAffinity()]
