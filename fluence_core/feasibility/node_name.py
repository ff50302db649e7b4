"""NodeName: a pod that names its node (``spec.nodeName``) may use only that node."""

from __future__ import annotations

from fluence_core import hookimpl
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.settings import Settings

REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = "NodeName"
    reads_pods = False

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        if not pod.node_name:
            return None
        wanted = pod.node_name

        def check(node: NodeFacts) -> tuple[str, ...]:
            return FINE if node.name == wanted else (REASON,)

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in NodeName filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [NodeName()]
