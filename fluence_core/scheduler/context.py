"""What every scheduler hook receives: one typed, read-only context per attempt.

A plugin sees the settings, the graph and matcher the cycle uses, the
Kubernetes wrapper, and a few facts about the attempt in progress. It never
sees the scheduler itself, so the scheduler's insides can change without
breaking a plugin. The cycle makes one context per group attempt and hands a
copy with more facts filled in (:func:`dataclasses.replace`) to later hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fluence_core.kube.api import ClusterAPI
    from fluence_core.graph import ResourceGraph
    from fluence_core.matcher.base import Matcher
    from fluence_core.settings import Settings


def _no_pods(node: str) -> int:
    return 0


@dataclass(frozen=True)
class SchedulingContext:
    """The scheduler's state a hook may read while one group is being placed."""

    settings: Settings
    """Fluence's settings (``FLUENCE_*``)."""
    graph: ResourceGraph
    """The resource graph the matcher places on."""
    matcher: Matcher
    """The matcher in use; hooks may read its allocations, never change them."""
    cluster: ClusterAPI
    """The Kubernetes wrapper (real or in-memory); reserve-type hooks write through it."""
    pods_on: Callable[[str], int] = _no_pods
    """Live pods bound, or being bound, to a node (the kubelet's ``pods`` limit counts these)."""
    planned: Mapping[str, int] = field(default_factory=dict)
    """``fluence_filter`` and later: node -> how many of this group's pods the match put there."""
    vetoed: Sequence[str] = ()
    """``fluence_postfilter``: the nodes ``fluence_filter`` refused this attempt, sorted
    (empty when the group simply did not fit)."""
