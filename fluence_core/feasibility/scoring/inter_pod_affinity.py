"""InterPodAffinity's score: preferred pod affinity and anti-affinity, both ways.

As kube-scheduler scores it, each placed pod adds to (or takes from) the
topology domain of its node, for every term that names the other side:

* the pod's preferred affinity terms matching the placed pod: + weight;
* the pod's preferred anti-affinity terms matching it: - weight;
* the placed pod's required affinity terms matching the pod: + 1
  (``hardPodAffinityWeight``);
* the placed pod's preferred affinity terms matching the pod: + weight, its
  preferred anti-affinity terms: - weight.

A node scores the sum over the domains it belongs to, and the sums are scaled
from the lowest (0) to the highest (100); all equal, all 0. Only pods with
affinity terms are read unless the pod has preferred terms of its own. Weight 2
in kube-scheduler's default profile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fluence_core import hookimpl
from fluence_core.feasibility.inter_pod_affinity import term_matches
from fluence_core.feasibility.facts import (
    AffinityTerm, NodeFacts, PodFacts, Snapshot, WeightedTerm,
)
from fluence_core.feasibility.scoring.base import MAX_NODE_SCORE, NodeScores, ScorePlugin
from fluence_core.settings import Settings

HARD_POD_AFFINITY_WEIGHT = 1
"""kube-scheduler's default ``hardPodAffinityWeight``."""

_Scores = dict[str, dict[str, int]]
"""topology key -> value -> score."""


def _add(scores: _Scores, labels: Mapping[str, str], term: AffinityTerm, weight: int) -> None:
    value = labels.get(term.topology_key)
    if value is not None:
        per_key = scores.setdefault(term.topology_key, {})
        per_key[value] = per_key.get(value, 0) + weight


def _weighted(terms: Iterable[WeightedTerm], sign: int) -> Iterable[tuple[AffinityTerm, int]]:
    return ((t.term, sign * t.weight) for t in terms)


class InterPodAffinityScore:
    name = "InterPodAffinity"
    weight = 2

    def score(self, pod: PodFacts, snapshot: Snapshot,
              nodes: Sequence[NodeFacts]) -> NodeScores | None:
        if not (pod.preferred_affinity or pod.preferred_anti_affinity or snapshot.affine):
            return None  # the common pod, checked before anything is built
        own = [*_weighted(pod.preferred_affinity, 1), *_weighted(pod.preferred_anti_affinity, -1)]
        others = snapshot.pods if own else snapshot.affine
        own_labels = snapshot.namespace_labels(pod.namespace)
        scores: _Scores = {}
        for other in others:
            if not own and not (other.affinity or other.preferred_affinity
                                or other.preferred_anti_affinity):
                continue  # only required anti-affinity: it scores nothing (a filter's concern)
            node = snapshot.node(other.node_name)
            if node is None or not node.labels:
                continue
            if own:
                their_labels = snapshot.namespace_labels(other.namespace)
                for term, weight in own:
                    if term_matches(term, other, their_labels):
                        _add(scores, node.labels, term, weight)
            theirs = [*((t, HARD_POD_AFFINITY_WEIGHT) for t in other.affinity),
                      *_weighted(other.preferred_affinity, 1),
                      *_weighted(other.preferred_anti_affinity, -1)]
            for term, weight in theirs:
                if term_matches(term, pod, own_labels):
                    _add(scores, node.labels, term, weight)
        if not scores:
            return None
        raw = {node.name: sum(per_key.get(node.labels[key], 0)
                              for key, per_key in scores.items() if key in node.labels)
               for node in nodes}
        lowest, highest = min(raw.values(), default=0), max(raw.values(), default=0)
        spread = highest - lowest
        return {name: int(MAX_NODE_SCORE * ((value - lowest) / spread)) if spread > 0 else 0
                for name, value in raw.items()}


@hookimpl
def fluence_score_plugins(settings: Settings) -> list[ScorePlugin]:
    """The built-in InterPodAffinity score (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [InterPodAffinityScore()]
