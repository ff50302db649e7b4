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
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot, SpreadConstraint
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


def _every_node_counts(constraint: SpreadConstraint, pod: PodFacts) -> bool:
    """Whether the constraint counts the pods of every node carrying its keys for this pod
    (its inclusion policies exclude none) and has a selector: then the snapshot's kept counts
    answer it (:meth:`Snapshot.spread_counts`), with no walk of the nodes."""
    selector = constraint.selector
    if selector is None or selector.empty or constraint.node_taints_policy == "Honor":
        return False
    return constraint.node_affinity_policy != "Honor" or (
        not pod.node_selector and pod.required_node_affinity is None)


class PodTopologySpread:
    name = "PodTopologySpread"
    reads_pods = True

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        hard = [c for c in pod.spread if c.when_unsatisfiable == HARD]
        if not hard:
            return None
        keys = frozenset(c.topology_key for c in hard)
        counts: Counter[tuple[str, str]] = Counter()
        if all(_every_node_counts(c, pod) for c in hard):
            for c in hard:
                assert c.selector is not None
                found = snapshot.spread_counts(pod.namespace, c.selector, c.topology_key, keys)
                for where, count in found.items():
                    counts[(c.topology_key, where)] += count
        else:
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

        refused: list[tuple[str, frozenset[str] | None]] = []
        """Per hard constraint: its key, and the domains it refuses (None: it is skipped)."""
        for c in hard:
            key = c.topology_key
            if key not in lowest:
                refused.append((key, None))  # no eligible domain at all: kube-scheduler skips it
                continue
            floor = 0 if domains[key] < c.min_domains else lowest[key]
            own = 1 if c.selector is not None and c.selector.matches(pod.labels) else 0
            refused.append((key, frozenset(value for (k, value), count in counts.items()
                                           if k == key and count + own - floor > c.max_skew)))

        def check(node: NodeFacts) -> tuple[str, ...]:
            labels = node.labels
            for key, too_many in refused:
                value = labels.get(key)
                if value is None:
                    return (MISSING_LABEL,)
                if too_many and value in too_many:
                    return (REASON,)
            return FINE

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in PodTopologySpread filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [PodTopologySpread()]
