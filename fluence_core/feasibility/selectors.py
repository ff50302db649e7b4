"""Label selectors and node selectors, matched as Kubernetes matches them.

Two selector languages exist. A *label selector* (``metav1.LabelSelector``:
``matchLabels`` + ``matchExpressions`` with In/NotIn/Exists/DoesNotExist) picks
pods and namespaces; an absent selector matches nothing and an empty one matches
everything. A *node selector* (``v1.NodeSelector``: terms ORed, each term's
requirements ANDed, operators In/NotIn/Exists/DoesNotExist/Gt/Lt, plus
``matchFields`` on ``metadata.name``) picks nodes; a term with no requirement
matches no node, and a requirement Kubernetes cannot parse makes its term match
nothing rather than everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPERATORS = _LABEL_OPERATORS | {"Gt", "Lt"}


class SelectorError(ValueError):
    """A selector Kubernetes would refuse; the message names where it sits."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key <operator> values`` requirement."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if not present or len(self.values) != 1:
            return False
        wanted, have = _integer(self.values[0]), _integer(labels[self.key])
        if wanted is None or have is None:
            return False
        return have > wanted if self.operator == "Gt" else have < wanted


def _integer(text: str) -> int | None:
    try:
        return int(text, 10)
    except ValueError:
        return None


def _requirements(raw: Any, where: str, operators: frozenset[str]) -> tuple[Requirement, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SelectorError(f"{where}: expected a list of requirements, got {raw!r}")
    found = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not item.get("key"):
            raise SelectorError(f"{where}[{i}]: a requirement needs a key, got {item!r}")
        operator = item.get("operator")
        if operator not in operators:
            raise SelectorError(
                f"{where}[{i}]: operator {operator!r} is not one of {sorted(operators)}"
            )
        values = tuple(str(v) for v in item.get("values") or ())
        found.append(Requirement(str(item["key"]), str(operator), values))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed ``metav1.LabelSelector`` (present: ``None`` stands for an absent one)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """Matches everything (``{}``)."""
        return not self.requirements

    def merged(self, labels: Mapping[str, str]) -> LabelSelector:
        """This selector narrowed to also require ``labels`` (``matchLabelKeys``)."""
        extra = tuple(Requirement(k, "In", (v,)) for k, v in sorted(labels.items()))
        return LabelSelector(extra + self.requirements)

    @classmethod
    def parse(cls, raw: Any, where: str) -> LabelSelector | None:
        """``None`` for an absent selector (which matches nothing)."""
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise SelectorError(f"{where}: expected a label selector, got {raw!r}")
        match_labels = raw.get("matchLabels") or {}
        if not isinstance(match_labels, Mapping):
            raise SelectorError(f"{where}.matchLabels: expected a mapping, got {match_labels!r}")
        simple = tuple(Requirement(str(k), "In", (str(v),)) for k, v in match_labels.items())
        expressions = _requirements(
            raw.get("matchExpressions"), f"{where}.matchExpressions", _LABEL_OPERATORS
        )
        return cls(simple + expressions)


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes' rule: an absent selector selects nothing."""
    return selector is not None and selector.matches(labels)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements on a node's labels and on its name, all of which must hold."""

    labels: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()
    broken: bool = False
    """Kubernetes could not parse it: it matches no node."""

    def matches(self, node_name: str, node_labels: Mapping[str, str]) -> bool:
        if self.broken or not (self.labels or self.fields):
            return False
        if not all(r.matches(node_labels) for r in self.labels):
            return False
        fields = {"metadata.name": node_name} if node_name else {}
        return all(r.matches(fields) for r in self.fields)


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """``v1.NodeSelector``: its terms ORed."""

    terms: tuple[NodeSelectorTerm, ...] = ()

    def matches(self, node_name: str, node_labels: Mapping[str, str]) -> bool:
        return any(t.matches(node_name, node_labels) for t in self.terms)

    @classmethod
    def parse(cls, raw: Any, where: str) -> NodeSelector:
        if not isinstance(raw, Mapping):
            raise SelectorError(f"{where}: expected a node selector, got {raw!r}")
        terms = raw.get("nodeSelectorTerms") or []
        if not isinstance(terms, list):
            raise SelectorError(f"{where}.nodeSelectorTerms: expected a list, got {terms!r}")
        return cls(tuple(_term(t, f"{where}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)))


def parse_term(raw: Any, where: str) -> NodeSelectorTerm:
    """One ``v1.NodeSelectorTerm`` (a preferred node affinity term's ``preference``)."""
    return _term(raw, where)


def _term(raw: Any, where: str) -> NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected a term, got {raw!r}")
    labels = _requirements(
        raw.get("matchExpressions"), f"{where}.matchExpressions", _NODE_OPERATORS
    )
    fields = _requirements(raw.get("matchFields"), f"{where}.matchFields", _NODE_OPERATORS)
    broken = any(r.operator in ("Gt", "Lt") and (
        len(r.values) != 1 or _integer(r.values[0]) is None) for r in labels)
    broken = broken or any(r.operator not in ("In", "NotIn") or len(r.values) != 1 for r in fields)
    return NodeSelectorTerm(labels, fields, broken)
