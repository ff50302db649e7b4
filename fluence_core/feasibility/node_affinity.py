"""NodeAffinity: ``spec.nodeSelector`` and the required node affinity must both hold.

The selector's labels must all be on the node; of the required affinity's terms
at least one must match (see :mod:`fluence_core.feasibility.selectors`).
Preferred terms are for scoring and never refuse a node.
"""

from __future__ import annotations

from fluence_core import hookimpl
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.settings import Settings

REASON = "node(s) didn't match Pod's node affinity/selector"


def required_match(pod: PodFacts, node: NodeFacts) -> bool:
    """Kubernetes' ``GetRequiredNodeAffinity(pod).Match(node)``: selector and required terms."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    affinity = pod.required_node_affinity
    return affinity is None or affinity.matches(node.name, labels)


class NodeAffinity:
    name = "NodeAffinity"
    reads_pods = False

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        if not pod.node_selector and pod.required_node_affinity is None:
            return None

        def check(node: NodeFacts) -> tuple[str, ...]:
            return FINE if required_match(pod, node) else (REASON,)

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in NodeAffinity filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [NodeAffinity()]
