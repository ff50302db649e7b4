"""TaintToleration's score: fewer PreferNoSchedule taints the pod does not tolerate is better.

kube-scheduler counts, per node, the ``PreferNoSchedule`` taints none of the
pod's tolerations (those with that effect or no effect) tolerates, and reverses
the scaled counts: the node with the most such taints scores 0, a node with none
100. Weight 3 in kube-scheduler's default profile.
"""

from __future__ import annotations

from collections.abc import Sequence

from fluence_core import hookimpl
from fluence_core.feasibility.facts import (
    PREFER_NO_SCHEDULE, NodeFacts, PodFacts, Snapshot,
)
from fluence_core.feasibility.scoring.base import NodeScores, ScorePlugin, default_normalize
from fluence_core.feasibility.taints import tolerates
from fluence_core.settings import Settings


class TaintTolerationScore:
    name = "TaintToleration"
    weight = 3

    def score(self, pod: PodFacts, snapshot: Snapshot,
              nodes: Sequence[NodeFacts]) -> NodeScores | None:
        if not snapshot.soft_tainted:
            return None  # no node has such a taint: every node scores 100
        tolerations = [t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
        raw = {
            node.name: sum(1 for taint in node.taints if taint.effect == PREFER_NO_SCHEDULE
                           and not any(tolerates(t, taint) for t in tolerations))
            for node in nodes
        }
        return default_normalize(raw, reverse=True)


@hookimpl
def fluence_score_plugins(settings: Settings) -> list[ScorePlugin]:
    """The built-in TaintToleration score (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [TaintTolerationScore()]
