"""NodeAffinity's score: the weights of the preferred node affinity terms a node matches.

kube-scheduler sums, per node, the weights of the pod's
``preferredDuringSchedulingIgnoredDuringExecution`` terms the node matches (a
term with no requirement matches none), then scales the sums so the highest is
100. Weight 2 in kube-scheduler's default profile.
"""

from __future__ import annotations

from collections.abc import Sequence

from fluence_core import hookimpl
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.scoring.base import NodeScores, ScorePlugin, default_normalize
from fluence_core.settings import Settings


class NodeAffinityScore:
    name = "NodeAffinity"
    weight = 2

    def score(self, pod: PodFacts, snapshot: Snapshot,
              nodes: Sequence[NodeFacts]) -> NodeScores | None:
        terms = pod.preferred_node_affinity
        if not terms:
            return None
        raw = {node.name: sum(t.weight for t in terms if t.term.matches(node.name, node.labels))
               for node in nodes}
        return default_normalize(raw, reverse=False)


@hookimpl
def fluence_score_plugins(settings: Settings) -> list[ScorePlugin]:
    """The built-in NodeAffinity score (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [NodeAffinityScore()]
