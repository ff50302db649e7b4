"""NodeUnschedulable: a cordoned node takes only pods tolerating its cordon taint.

``spec.unschedulable`` stands for the taint
``node.kubernetes.io/unschedulable:NoSchedule``; a pod that tolerates that taint
(DaemonSet pods do) may still go there.
"""

from __future__ import annotations

from fluence_core import hookimpl, names
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot, Taint
from fluence_core.feasibility.taints import tolerates
from fluence_core.settings import Settings

CORDON_TAINT = Taint(names.UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
REASON = "node(s) were unschedulable"


class NodeUnschedulable:
    name = "NodeUnschedulable"
    reads_pods = False

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck:
        allowed = any(tolerates(t, CORDON_TAINT) for t in pod.tolerations)

        def check(node: NodeFacts) -> tuple[str, ...]:
            return (REASON,) if node.unschedulable and not allowed else FINE

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in NodeUnschedulable filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [NodeUnschedulable()]
