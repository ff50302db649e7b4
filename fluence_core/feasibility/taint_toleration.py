"""TaintToleration: a node's NoSchedule and NoExecute taints keep off pods not tolerating them.

PreferNoSchedule taints never refuse a node; they are a preference, for
scoring, and feasibility does not score.
"""

from __future__ import annotations

from fluence_core import hookimpl
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.taints import first_untolerated
from fluence_core.settings import Settings


def reason(key: str, value: str) -> str:
    """kube-scheduler's wording, the taint shown as ``{key: value}``."""
    return f"node(s) had untolerated taint {{{key}: {value}}}"


class TaintToleration:
    name = "TaintToleration"
    reads_pods = False

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck:
        tolerations = pod.tolerations

        def check(node: NodeFacts) -> tuple[str, ...]:
            taint = first_untolerated(node.taints, tolerations)
            return FINE if taint is None else (reason(taint.key, taint.value),)

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in TaintToleration filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [TaintToleration()]
