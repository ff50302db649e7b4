"""Taints and tolerations, matched as Kubernetes' ``Toleration.ToleratesTaint`` does.

A toleration matches a taint when its effect is empty or equal, its key is
empty or equal, and its operator agrees on the value: Equal (also the empty
operator) compares strings, Exists takes any value, Lt and Gt compare the two
values as integers (the taint's below / above the toleration's). Only taints
whose effect is NoSchedule or NoExecute keep a pod off a node.
"""

from __future__ import annotations

from collections.abc import Iterable

from fluence_core.feasibility.facts import Taint, Toleration

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Lt", "Gt"):
        try:
            mine, theirs = int(toleration.value, 10), int(taint.value, 10)
        except ValueError:
            return False
        return theirs < mine if toleration.operator == "Lt" else theirs > mine
    return False


def first_untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration matches, in the node's order."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
