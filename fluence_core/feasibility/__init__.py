"""Which nodes a pod may use, by kube-scheduler's own filters, before any matching.

Pure functions over plain records (:class:`PodFacts`, :class:`NodeFacts`,
:class:`Snapshot`), read once from Kubernetes dicts. Each of kube-scheduler's
filters lives in its own module with kube-scheduler's semantics and wording;
:func:`feasible` runs them in kube-scheduler's order and says why every other
node was refused. The scheduler hands the feasible set to the matcher as a
constraint, so nothing is vetoed after a match.
"""

from fluence_core.feasibility.base import FeasibilityFilter, NodeCheck, Refusal
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.run import Feasibility, default_filters, feasible, nodes_to_find

__all__ = [
    "Feasibility", "FeasibilityFilter", "NodeCheck", "NodeFacts", "PodFacts", "Refusal",
    "Snapshot", "default_filters", "feasible", "nodes_to_find",
]
