"""Running the filters over every node, and kube-scheduler's summary when none is left.

The filters run in kube-scheduler's default order and a node's verdict is the
first filter that refuses it, as kube-scheduler stops at the first refusal.
The summary reads as kube-scheduler's ``FitError`` does: "0/12 nodes are
available: 4 node(s) had untolerated taint {gpu: true}, 8 Insufficient cpu."
(each reason counted once per node refused for it, the pieces sorted).

**Enough feasible nodes.** kube-scheduler does not ask every node of a large
cluster: it walks the nodes from where its last search stopped and stops once it
has found :func:`nodes_to_find` feasible ones (``percentageOfNodesToScore``,
adaptive by default), then scores only those. :func:`feasible` does the same
when asked (``enough``), and only for an answer that reads the placed pods: an
answer of the nodes alone is kept and reused whole, so it is worth every node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from fluence_core.feasibility.base import FeasibilityFilter, NodeCheck, Refusal
from fluence_core.feasibility.builtins import BUILTIN_FILTERS, KUBE_ORDER
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot


MIN_FEASIBLE_NODES_TO_FIND = 100
"""kube-scheduler's ``minFeasibleNodesToFind``: below this many nodes, every node is asked."""
MIN_FEASIBLE_NODES_PERCENTAGE = 5
"""kube-scheduler's ``minFeasibleNodesPercentageToFind``: the adaptive percentage's floor."""


def nodes_to_find(total: int, percentage: int = 0) -> int:
    """How many feasible nodes end a search over ``total`` nodes, as kube-scheduler's
    ``numFeasibleNodesToFind`` counts them.

    ``percentage`` is ``percentageOfNodesToScore``; 0 is kube-scheduler's adaptive default,
    ``50 - total/125`` percent, at least 5. Never fewer than 100 nodes, and every node of
    a cluster of fewer than 100 (so small clusters, and every fidelity case, see all).
    """
    if total < MIN_FEASIBLE_NODES_TO_FIND:
        return total
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE, 50 - total // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, total * percentage // 100)


def default_filters() -> list[FeasibilityFilter]:
    """Every built-in filter (:data:`~fluence_core.feasibility.builtins.BUILTIN_FILTERS`),
    with kube-scheduler's full semantics, in its order."""
    return [builtin() for builtin in BUILTIN_FILTERS]


def in_kube_order(filters: Iterable[FeasibilityFilter]) -> list[FeasibilityFilter]:
    """kube-scheduler's filters in its order, then any others in the order given."""
    found = list(filters)
    rank = {name: i for i, name in enumerate(KUBE_ORDER)}
    return sorted(found, key=lambda f: (rank.get(f.name, len(rank)), found.index(f)))


@dataclass
class Feasibility:
    """Which nodes a pod may use, and why each other node was refused."""

    nodes: list[str]
    refused: dict[str, tuple[str, ...]] = field(default_factory=dict)
    refusal: str | None = None
    """Set when the pod fits no node whatever the node (a PreFilter failure)."""
    total: int = 0
    lasting: bool = False
    """No filter that reads the placed pods had anything to ask: the answer holds for as
    long as the nodes do not change."""
    feasible_nodes: list[NodeFacts] = field(default_factory=list)
    """The nodes of ``nodes``, as read (what the preference scores are asked about)."""
    searched: int = 0
    """How many nodes were asked: ``total`` unless the search stopped at ``enough``."""

    @property
    def partial(self) -> bool:
        """The search stopped early: nodes it did not ask may fit too."""
        return self.searched < self.total

    @cached_property
    def node_set(self) -> frozenset[str]:
        """``nodes`` as a set, made once per answer: every pod of a signature shares it (a set
        of five thousand names made per pod was a cost that grew with pods x nodes)."""
        return frozenset(self.nodes)

    def summary(self) -> str:
        """kube-scheduler's FailedScheduling message (meaningful when no node is left)."""
        head = f"{len(self.nodes)}/{self.total} nodes are available"
        if self.refusal is not None:
            return f"{head}: {self.refusal}."
        counts: Counter[str] = Counter(r for reasons in self.refused.values() for r in reasons)
        if not counts:
            return f"{head}."
        pieces = sorted(f"{n} {reason}" for reason, n in counts.items())
        return f"{head}: {', '.join(pieces)}."


def feasible(
    pod: PodFacts,
    snapshot: Snapshot,
    filters: Iterable[FeasibilityFilter] | None = None,
    nodes: Sequence[NodeFacts] | None = None,
    *,
    enough: int | None = None,
    start: int = 0,
) -> Feasibility:
    """The nodes of ``nodes`` (default: all of the snapshot's) that ``pod`` may use.

    With ``enough``, an answer that reads the placed pods asks the nodes from position
    ``start`` on (wrapping round) and stops once it has ``enough`` feasible ones;
    ``searched`` says how many it asked, so that the next search starts after them.
    """
    candidates = list(snapshot.nodes if nodes is None else nodes)
    checks: list[NodeCheck] = []
    lasting = True
    for feasibility_filter in default_filters() if filters is None else filters:
        prepared = feasibility_filter.prepare(pod, snapshot)
        if isinstance(prepared, Refusal):
            return Feasibility([], refusal=prepared.reason, total=len(candidates),
                               searched=len(candidates))
        if prepared is not None:
            checks.append(prepared)
            lasting = lasting and not feasibility_filter.reads_pods
    total = len(candidates)
    result = Feasibility([], total=total, lasting=lasting, searched=total)
    limit = total if lasting or enough is None else max(1, enough)
    if limit < total and start % total:
        at = start % total
        candidates = candidates[at:] + candidates[:at]
    for searched, node in enumerate(candidates, 1):
        for check in checks:
            reasons = check(node)
            if reasons:
                result.refused[node.name] = tuple(reasons)
                break
        else:
            result.nodes.append(node.name)
            result.feasible_nodes.append(node)
            if len(result.nodes) >= limit:
                result.searched = searched
                break
    return result
