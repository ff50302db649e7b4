"""PodTopologySpread's score: ``ScheduleAnyway`` constraints, fewer matching pods is better.

As kube-scheduler scores it:

* only the pod's ``ScheduleAnyway`` constraints count (no default constraints:
  Fluence does not derive selectors from Services or ReplicaSets);
* a feasible node lacking any constraint's topology key is ignored (scores 0);
* a domain (a value of the key on the feasible nodes) counts the matching pods
  of the pod's namespace on every node carrying every key and passing the
  constraint's inclusion policies; for ``kubernetes.io/hostname`` the node's own
  pods count;
* a node's raw score is, summed over the constraints,
  ``count * ln(domains + 2) + maxSkew - 1``, rounded; the scores are then
  turned round, ``100 * (max + min - score) / max``, so the emptiest domain
  scores 100.

Weight 2 in kube-scheduler's default profile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fluence_core import hookimpl
from fluence_core import names
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.pod_topology_spread import count_matching, includes
from fluence_core.feasibility.scoring.base import MAX_NODE_SCORE, NodeScores, ScorePlugin
from fluence_core.settings import Settings

SOFT = "ScheduleAnyway"


class PodTopologySpreadScore:
    name = "PodTopologySpread"
    weight = 2

    def score(self, pod: PodFacts, snapshot: Snapshot,
              nodes: Sequence[NodeFacts]) -> NodeScores | None:
        if not pod.spread:
            return None
        soft = [c for c in pod.spread if c.when_unsatisfiable == SOFT]
        if not soft:
            return None
        keys = [c.topology_key for c in soft]
        scored = [n for n in nodes if all(k in n.labels for k in keys)]
        counts: list[dict[str, int]] = [
            {} if c.topology_key == names.HOSTNAME_LABEL
            else {n.labels[c.topology_key]: 0 for n in scored}
            for c in soft
        ]
        weights = [
            math.log((len(scored) if c.topology_key == names.HOSTNAME_LABEL
                      else len(counts[i])) + 2)
            for i, c in enumerate(soft)
        ]
        for node in snapshot.nodes:
            if not all(k in node.labels for k in keys):
                continue
            for i, c in enumerate(soft):
                value = node.labels[c.topology_key]
                if value in counts[i] and includes(c, pod, node):
                    counts[i][value] += count_matching(snapshot, node.name, c, pod.namespace)
        raw: dict[str, int] = {}
        for node in scored:
            total = 0.0
            for i, c in enumerate(soft):
                if c.topology_key == names.HOSTNAME_LABEL:
                    count = count_matching(snapshot, node.name, c, pod.namespace)
                else:
                    count = counts[i][node.labels[c.topology_key]]
                total += count * weights[i] + (c.max_skew - 1)
            raw[node.name] = math.floor(total + 0.5)  # Go's math.Round, for these positives
        scores = dict.fromkeys((n.name for n in nodes), 0)  # ignored nodes score 0
        if raw:
            lowest, highest = min(raw.values()), max(raw.values())
            for name, mine in raw.items():
                scores[name] = (MAX_NODE_SCORE if highest == 0 else
                                MAX_NODE_SCORE * (highest + lowest - mine) // highest)
        return scores


@hookimpl
def fluence_score_plugins(settings: Settings) -> list[ScorePlugin]:
    """The built-in PodTopologySpread score (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [PodTopologySpreadScore()]
