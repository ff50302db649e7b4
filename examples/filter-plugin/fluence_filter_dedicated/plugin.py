"""Entry point ``filter-dedicated``: nodes labelled for one namespace take only its pods.

A node labelled ``dedicated.example.com/namespace: team-a`` is refused to every pod
outside ``team-a``; nodes without the label are everyone's. Teams get nodes of their
own without taints that every one of their workloads would have to tolerate.

The filter is asked once per pod (:meth:`DedicatedNodes.prepare`) and returns the
check the scheduler runs on each node. Its answer depends only on the pod and the
node, never on the pods already placed, so ``reads_pods`` is ``False`` and the
scheduler may keep the answer for as long as the node is unchanged.
"""

from __future__ import annotations

from fluence_core.api import (
    FeasibilityFilter, NodeCheck, NodeFacts, PodFacts, Settings, Snapshot, hookimpl,
)

DEDICATED_LABEL = "dedicated.example.com/namespace"
REASON = "node(s) were dedicated to another namespace"


class DedicatedNodes:
    """Keeps a node labelled with :data:`DEDICATED_LABEL` for its namespace's pods."""

    name = "DedicatedNodes"
    reads_pods = False

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck:
        def check(node: NodeFacts) -> tuple[str, ...]:
            owner = node.labels.get(DEDICATED_LABEL)
            return (REASON,) if owner is not None and owner != pod.namespace else ()

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    return [DedicatedNodes()]
