"""NodeUnschedulable: a cordoned node takes only pods tolerating its cordon taint.

``spec.unschedulable`` stands for the taint
``node.kubernetes.io/unschedulable:NoSchedule``; a pod that tolerates that taint
(DaemonSet pods do) may still go there.
"""

from __future__ import annotations

from fluence_core.feasibility.base import FINE, NodeCheck
from fluence_core.feasibility.objects import NodeFacts, PodFacts, Snapshot, Taint
from fluence_core.feasibility.taints import tolerates

CORDON_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
REASON = "node(s) were unschedulable"


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck:
        allowed = any(tolerates(t, CORDON_TAINT) for t in pod.tolerations)

        def check(node: NodeFacts) -> tuple[str, ...]:
            return (REASON,) if node.unschedulable and not allowed else FINE

        return check
