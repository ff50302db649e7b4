"""kube-scheduler's filters that Fluence ships, in kube-scheduler's order: the one list.

Everything else is derived from :data:`BUILTIN_FILTERS`: :data:`KUBE_ORDER` (the
order any set of filters runs in), :func:`~fluence_core.feasibility.run.default_filters`
(every built-in, with kube-scheduler's full semantics) and each one's entry-point name
(:func:`entry_point_name`). The entry points themselves live in ``pyproject.toml``,
which cannot import this; ``tests/feasibility/test_builtins.py`` fails when the two
drift apart.

Adding a built-in filter touches three files: its module (the class, named as
kube-scheduler names the plugin, and its ``fluence_feasibility_filters`` hookimpl),
one line here, and its ``filter-*`` entry point in ``pyproject.toml``.
"""

from __future__ import annotations

from fluence_core.feasibility.base import FeasibilityFilter
from fluence_core.feasibility.inter_pod_affinity import InterPodAffinity
from fluence_core.feasibility.node_affinity import NodeAffinity
from fluence_core.feasibility.node_name import NodeName
from fluence_core.feasibility.node_ports import NodePorts
from fluence_core.feasibility.node_resources_fit import NodeResourcesFit
from fluence_core.feasibility.node_unschedulable import NodeUnschedulable
from fluence_core.feasibility.pod_topology_spread import PodTopologySpread
from fluence_core.feasibility.taint_toleration import TaintToleration
from fluence_core.feasibility.volume_binding import VolumeBinding

BUILTIN_FILTERS: tuple[type[FeasibilityFilter], ...] = (
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeBinding,
    PodTopologySpread,
    InterPodAffinity,
)
"""kube-scheduler's default profile's filters, in the order it runs them."""

KUBE_ORDER: tuple[str, ...] = tuple(f.name for f in BUILTIN_FILTERS)
"""Their names (kube-scheduler's plugin names), in that order."""

ENTRY_POINT_PREFIX = "filter-"


def entry_point_name(builtin: type[FeasibilityFilter]) -> str:
    """``filter-node-resources-fit`` for the filter in ``feasibility/node_resources_fit.py``:
    the name ``FLUENCE_DISABLE_PLUGINS`` takes to leave it out."""
    return ENTRY_POINT_PREFIX + builtin.__module__.rsplit(".", 1)[-1].replace("_", "-")
