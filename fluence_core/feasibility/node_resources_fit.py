"""NodeResourcesFit: the pod's requests fit what the node's pods leave of its allocatable.

Counted as kube-scheduler counts: one more pod than allocatable ``pods`` does
not fit; a pod requesting nothing at all needs only a pod slot; otherwise each
resource the pod requests (CPU in millicores, memory, ``ephemeral-storage``,
``hugepages-*``, any extended resource) must fit, a resource the node does not
advertise having none. ``ignored`` leaves out resources another part of Fluence
counts (the graph counts cores, memory and pod slots itself).
"""

from __future__ import annotations

from collections.abc import Collection

from fluence_core import hookimpl, names
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from fluence_core.settings import Settings

TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def requested_on(snapshot: Snapshot, node: str) -> dict[str, int]:
    """What the pods bound to ``node`` request, summed."""
    total: dict[str, int] = {}
    for pod in snapshot.pods_on(node):
        for resource, value in pod.requests.items():
            total[resource] = total.get(resource, 0) + value
    return total


_FIRST = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}


def _order(resource: str) -> tuple[int, str]:
    """kube-scheduler's order of reasons: cpu, memory, ephemeral-storage, then the rest."""
    return (_FIRST.get(resource, 3), resource)


class NodeResourcesFit:
    name = "NodeResourcesFit"
    reads_pods = True

    def __init__(
        self, ignored: Collection[str] = (), ignored_prefixes: tuple[str, ...] = ()
    ) -> None:
        self.ignored = frozenset(ignored)
        self.ignored_prefixes = ignored_prefixes

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        wanted = {r: pod.requests[r] for r in sorted(pod.requests, key=_order)
                  if r != PODS and r not in self.ignored
                  and not r.startswith(self.ignored_prefixes)}
        count_pods = PODS not in self.ignored
        needs_any = any(v > 0 for v in wanted.values())
        if not needs_any and not count_pods:
            return None

        def check(node: NodeFacts) -> tuple[str, ...]:
            reasons = []
            if count_pods and len(snapshot.pods_on(node.name)) + 1 > node.max_pods:
                reasons.append(TOO_MANY_PODS)
            if needs_any:
                used = requested_on(snapshot, node.name)
                for resource, value in wanted.items():
                    free = node.allocatable.get(resource, 0) - used.get(resource, 0)
                    if value > 0 and value > free:
                        reasons.append(insufficient(resource))
            return tuple(reasons) if reasons else FINE

        return check


GRAPH_COUNTED = frozenset({CPU, MEMORY, PODS, names.GPU_RESOURCE})
"""What the resource graph counts itself (cores, memory chunks, GPUs, pod slots), as it
counts the virtual types under ``fluxion.flux-framework.org/``: the matcher decides those."""


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The built-in NodeResourcesFit filter, for every resource the graph does not count
    (``ephemeral-storage``, ``hugepages-*``, any vendor's extended resource)."""
    return [NodeResourcesFit(GRAPH_COUNTED, (f"{names.RESOURCE_DOMAIN}/",))]
