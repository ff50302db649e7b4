"""kube-scheduler's soft preferences, scored, and the tiers of nodes they give a pod.

kube-scheduler scores every feasible node with each Score plugin, normalises each
plugin's scores to 0-100 over the feasible nodes, and binds to the node with the highest
weighted sum. Fluence keeps the four scores that are *preferences* a pod or a node states,
each a built-in ``score-*`` plugin contributed by ``fluence_score_plugins``: NodeAffinity
(weight 2), TaintToleration (3), PodTopologySpread (2, ``ScheduleAnyway`` constraints)
and InterPodAffinity (2; the placed pods' required affinity counts 1). The scores that
balance resources (LeastAllocated, BalancedAllocation) are left out: where a pod's cores
go among equally preferred nodes is the matcher's policy, which the graph exists for.

The weighted sums do not reach the matcher as numbers: neither Fluxion's jobspec nor the
embedded matcher orders nodes by an outside score. They reach it as *tiers*
(:func:`preference_tiers`): the nodes of the best sum, then those of the best two sums,
and so on, each a ``hostlist`` the group is matched against in turn, the whole feasible
set last. Both matchers honour a hostlist, so both honour a preference, and a preference
never keeps a pod from a node it fits on.
"""

from fluence_core.feasibility.scoring.base import (
    MAX_NODE_SCORE, NodeScores, ScorePlugin, default_normalize, preference_tiers, totals,
)

__all__ = [
    "MAX_NODE_SCORE", "NodeScores", "ScorePlugin", "default_normalize", "preference_tiers",
    "totals",
]
