"""The shape of a score plugin, kube-scheduler's normalisation, and preference tiers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot

MAX_NODE_SCORE = 100
"""kube-scheduler's ``framework.MaxNodeScore``: every normalised score is within 0-100."""

NodeScores = Mapping[str, int]
"""Node name -> normalised score (0-:data:`MAX_NODE_SCORE`)."""


class ScorePlugin(Protocol):
    """One of kube-scheduler's Score plugins (PreScore + Score + NormalizeScore in one)."""

    name: str
    weight: int
    """Its weight in kube-scheduler's default profile."""

    def score(self, pod: PodFacts, snapshot: Snapshot,
              nodes: Sequence[NodeFacts]) -> NodeScores | None:
        """Normalised scores of ``nodes`` (the pod's feasible nodes); ``None`` when the
        plugin has nothing to say about this pod (kube-scheduler's Skip: every node
        scores the same), which is what keeps pods without preferences cheap."""
        ...


def default_normalize(raw: Mapping[str, int], reverse: bool) -> dict[str, int]:
    """kube-scheduler's ``DefaultNormalizeScore``: scaled so the highest is 100 (integer
    division); ``reverse`` turns it round (100 minus that). All zero: 0 each, or 100
    each when reversed."""
    highest = max(raw.values(), default=0)
    if highest == 0:
        return {name: MAX_NODE_SCORE if reverse else 0 for name in raw}
    scaled = {name: MAX_NODE_SCORE * value // highest for name, value in raw.items()}
    if reverse:
        return {name: MAX_NODE_SCORE - value for name, value in scaled.items()}
    return scaled


def totals(pod: PodFacts, snapshot: Snapshot, nodes: Sequence[NodeFacts],
           plugins: Iterable[ScorePlugin]) -> dict[str, int] | None:
    """Each node's weighted sum of the plugins' scores; ``None`` when no plugin scored."""
    summed: dict[str, int] | None = None
    for plugin in plugins:
        scores = plugin.score(pod, snapshot, nodes)
        if scores is None:
            continue
        if summed is None:
            summed = {node.name: 0 for node in nodes}
        for name, value in scores.items():
            summed[name] += plugin.weight * value
    return summed


def preference_tiers(pod: PodFacts, snapshot: Snapshot, nodes: Sequence[NodeFacts],
                     plugins: Sequence[ScorePlugin], limit: int) -> tuple[frozenset[str], ...]:
    """The nodes of the best weighted sum, of the best two, ... (at most ``limit`` tiers,
    each holding the one before), every tier smaller than ``nodes``; empty when the
    preferences do not tell the nodes apart (or ``limit`` is 0)."""
    if limit <= 0 or len(nodes) < 2 or not plugins:
        return ()
    summed = totals(pod, snapshot, nodes, plugins)
    if summed is None:
        return ()
    levels = sorted(set(summed.values()), reverse=True)
    return tuple(
        frozenset(name for name, value in summed.items() if value >= level)
        for level in levels[:-1][:limit]
    )
