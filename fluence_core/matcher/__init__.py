"""Matchers: what turns a jobspec into an allocation on the resource graph."""

from fluence_core.matcher.base import (
    Allocation,
    GroupMatcher,
    GroupRefusal,
    Matcher,
    MatchOutcome,
    NodeShare,
    VirtualShare,
)

__all__ = [
    "Allocation", "GroupMatcher", "GroupRefusal", "Matcher", "MatchOutcome", "NodeShare",
    "VirtualShare",
]
