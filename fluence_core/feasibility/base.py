"""The shape every feasibility filter has, kube-scheduler's PreFilter + Filter in one.

A filter is asked once per pod (:meth:`FeasibilityFilter.prepare`, where
kube-scheduler's PreFilter computes its cycle state) and answers with one of:

* ``None``: nothing to check for this pod (kube-scheduler's Skip);
* a :class:`Refusal`: the pod fits no node, whatever the node (a PreFilter failure,
  say an unbound immediate claim);
* a :data:`NodeCheck`: a function from a node to the reasons it is refused, empty
  when the node is fine.

Reasons use kube-scheduler's own wording, so the summary an event carries reads
as kube-scheduler's does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot

NodeCheck = Callable[[NodeFacts], Sequence[str]]
"""The reasons a node is refused; empty when it is fine."""

FINE: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """The pod fits no node this cycle, for this reason."""

    reason: str


class FeasibilityFilter(Protocol):
    """One of kube-scheduler's filters, named as kube-scheduler names its plugin."""

    name: str
    reads_pods: bool
    """Whether its answer depends on the pods placed (ports, spread, affinity, free room)
    rather than on the node and the pod alone; an answer of only the others lasts."""

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | Refusal | None:
        """Look at the pod and the cluster once; return what to ask of each node."""
        ...
