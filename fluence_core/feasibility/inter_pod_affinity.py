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

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from fluence_core import hookimpl
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.facts import AffinityTerm, NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.selectors import matches
from fluence_core.settings import Settings

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"



def term_matches(term: AffinityTerm, pod: PodFacts | _LabelledPod,
                 namespace_labels: Mapping[str, str]) -> bool:
    """Whether ``pod`` (whose namespace carries ``namespace_labels``) is what ``term`` names."""
    in_namespace = pod.namespace in term.namespaces or (
        term.namespace_selector is not None and term.namespace_selector.matches(namespace_labels))
    return in_namespace and matches(term.selector, pod.labels)


Counts = list[Mapping[str, int]]
"""Pods per value of one topology key, from each group of pods alike or term that named the pod."""


def _taken(counts: Counts) -> Collection[str]:
    """The values of one key where any of ``counts`` holds a pod (counts hold no zeros): the
    one count itself, or the union of many, so that a node's check is one lookup."""
    if len(counts) == 1:
        return counts[0].keys()
    return {value for found in counts for value in found}


class InterPodAffinity:
    name = "InterPodAffinity"
    reads_pods = True

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        """Which domains the placed pods close or open to ``pod``, read from the snapshot's
        :class:`~fluence_core.feasibility.affinity_index.AffinityIndex`: each distinct term of
        the placed pods and each group of them alike (namespace and labels) is asked once,
        never each pod."""
        index = snapshot.affinity_index
        own_labels = snapshot.namespace_labels(pod.namespace)
        existing: dict[str, Counts] = {}
        for term, placed in index.anti_terms.items():
            if term_matches(term, pod, own_labels):
                existing.setdefault(term.topology_key, []).append(placed)
        affinity: dict[str, Counts] = {}
        anti: dict[str, Counts] = {}
        if pod.affinity or pod.anti_affinity:
            for alike in index.pods_alike():
                labels = snapshot.namespace_labels(alike.namespace)
                other = _LabelledPod(alike.namespace, alike.labels)
                if pod.affinity and all(term_matches(t, other, labels) for t in pod.affinity):
                    for term in pod.affinity:
                        affinity.setdefault(term.topology_key, []).append(
                            index.domains(alike, term.topology_key))
                for term in pod.anti_affinity:
                    if term_matches(term, other, labels):
                        anti.setdefault(term.topology_key, []).append(
                            index.domains(alike, term.topology_key))
        if not (pod.affinity or pod.anti_affinity or existing):
            return None
        matched_anywhere = any(found for counts in affinity.values() for found in counts)
        self_affine = bool(pod.affinity) and all(
            term_matches(t, pod, own_labels) for t in pod.affinity)
        affinity_keys = [(t.topology_key, _taken(affinity.get(t.topology_key, [])))
                         for t in pod.affinity]
        anti_keys = [(key, _taken(counts)) for key, counts in anti.items()]
        existing_keys = [(key, _taken(counts)) for key, counts in existing.items()]

        def check(node: NodeFacts) -> tuple[str, ...]:
            labels = node.labels
            found = True
            for key, counts in affinity_keys:
                value = labels.get(key)
                if value is None:
                    return (AFFINITY,)
                if value not in counts:
                    found = False
            if not found and not (not matched_anywhere and self_affine):
                return (AFFINITY,)
            for key, counts in anti_keys:
                if labels.get(key) in counts:
                    return (ANTI_AFFINITY,)
            for key, counts in existing_keys:
                if labels.get(key) in counts:
                    return (EXISTING_ANTI_AFFINITY,)
            return FINE

        return check


@dataclass(frozen=True, slots=True)
class _LabelledPod:
    """What a term reads of a placed pod (its namespace and labels)."""

    namespace: str
    labels: Mapping[str, str]


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in InterPodAffinity filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [InterPodAffinity()]
