"""PodTopologySpread: ``DoNotSchedule`` constraints keep the skew between domains bounded.

For each hard constraint, the domains are the values of its topology key on
the nodes that carry *every* hard constraint's key and pass its inclusion
policies (node affinity honoured and taints ignored unless the pod says
otherwise). A domain counts the pods of the pod's namespace matching the
constraint's selector (terminating pods left out). Placing the pod on a node
must keep ``count(domain) + (1 if the pod matches itself) - min(count)`` at or
below ``maxSkew``, where the minimum is 0 when fewer than ``minDomains``
domains exist. A node without the key is refused. ``ScheduleAnyway`` is a
preference and never refuses a node.
"""

from __future__ import annotations

from collections import Counter

from fluence_core import hookimpl
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.node_affinity import required_match
from fluence_core.feasibility.objects import NodeFacts, PodFacts, Snapshot, SpreadConstraint
from fluence_core.feasibility.taints import first_untolerated
from fluence_core.settings import Settings

REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"

HARD = "DoNotSchedule"


def includes(constraint: SpreadConstraint, pod: PodFacts, node: NodeFacts) -> bool:
    """Whether the constraint's inclusion policies count ``node``'s pods for ``pod``."""
    if constraint.node_affinity_policy == "Honor" and not required_match(pod, node):
        return False
    if constraint.node_taints_policy == "Honor" and first_untolerated(
            node.taints, pod.tolerations) is not None:
        return False
    return True


def count_matching(snapshot: Snapshot, node: str, constraint: SpreadConstraint,
                   namespace: str) -> int:
    """The pods on ``node`` the constraint counts: its namespace, its selector, not terminating
    (an empty selector counts none, as kube-scheduler's ``countPodsMatchSelector``)."""
    selector = constraint.selector
    if selector is None or selector.empty:
        return 0
    return sum(
        1 for p in snapshot.pods_on(node)
        if not p.terminating and p.namespace == namespace and selector.matches(p.labels)
    )


class PodTopologySpread:
    name = "PodTopologySpread"
    reads_pods = True

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        hard = [c for c in pod.spread if c.when_unsatisfiable == HARD]
        if not hard:
            return None
        keys = {c.topology_key for c in hard}
        counts: Counter[tuple[str, str]] = Counter()
        for node in snapshot.nodes:
            if not keys <= node.labels.keys():
                continue
            for c in hard:
                if includes(c, pod, node):
                    domain = (c.topology_key, node.labels[c.topology_key])
                    counts[domain] += count_matching(snapshot, node.name, c, pod.namespace)
        domains: Counter[str] = Counter(key for key, _ in counts)
        lowest: dict[str, int] = {}
        for (key, _), value in counts.items():
            lowest[key] = min(value, lowest.get(key, value))

        def check(node: NodeFacts) -> tuple[str, ...]:
            for c in hard:
                key = c.topology_key
                if key not in node.labels:
                    return (MISSING_LABEL,)
                if key not in lowest:
                    continue  # no eligible domain at all: kube-scheduler skips the constraint
                floor = 0 if domains[key] < c.min_domains else lowest[key]
                own = 1 if c.selector is not None and c.selector.matches(pod.labels) else 0
                if counts[(key, node.labels[key])] + own - floor > c.max_skew:
                    return (REASON,)
            return FINE

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in PodTopologySpread filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [PodTopologySpread()]
