"""fluence_core.feasibility.selectors: label and node selectors as Kubernetes matches them."""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core.feasibility.selectors import (
    LabelSelector, NodeSelector, Requirement, SelectorError, matches,
)

LABELS = {"zone": "a", "size": "8", "gpu": ""}


@pytest.mark.parametrize(("key", "operator", "values", "expected"), [
    ("zone", "In", ("a", "b"), True),
    ("zone", "In", ("b",), False),
    ("absent", "In", ("a",), False),
    ("zone", "NotIn", ("b",), True),
    ("zone", "NotIn", ("a",), False),
    ("absent", "NotIn", ("a",), True),          # NotIn holds where the key is missing
    ("gpu", "Exists", (), True),                # an empty value still exists
    ("absent", "Exists", (), False),
    ("absent", "DoesNotExist", (), True),
    ("zone", "DoesNotExist", (), False),
    ("size", "Gt", ("7",), True),
    ("size", "Gt", ("8",), False),
    ("size", "Lt", ("9",), True),
    ("size", "Lt", ("8",), False),
    ("zone", "Gt", ("1",), False),              # a label that is no integer never compares
    ("size", "Gt", ("x",), False),
    ("size", "Gt", ("1", "2"), False),          # Gt takes exactly one value
    ("absent", "Lt", ("9",), False),
])
def test_requirement_operators(
    key: str, operator: str, values: tuple[str, ...], expected: bool
) -> None:
    assert Requirement(key, operator, values).matches(LABELS) is expected


@pytest.mark.parametrize(("raw", "labels", "expected"), [
    (None, {"a": "1"}, False),                                   # absent selects nothing
    ({}, {"a": "1"}, True),                                      # empty selects everything
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]},
     {"a": "1"}, False),                                         # all requirements ANDed
    ({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]}]}, {}, True),
])
def test_label_selector(raw: Any, labels: dict[str, str], expected: bool) -> None:
    assert matches(LabelSelector.parse(raw, "here"), labels) is expected


def test_label_selector_rejects_gt_with_the_place_named() -> None:
    with pytest.raises(SelectorError, match=r"pod x\.matchExpressions\[0\]: operator 'Gt'"):
        LabelSelector.parse({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
                            "pod x")


def test_label_selector_requirement_needs_a_key() -> None:
    with pytest.raises(SelectorError, match="needs a key"):
        LabelSelector.parse({"matchExpressions": [{"operator": "Exists"}]}, "sel")


def test_merged_selector_also_requires_the_pods_own_labels() -> None:
    merged = LabelSelector.parse({"matchLabels": {"app": "x"}}, "s").merged({"rev": "1"})  # type: ignore[union-attr]
    assert merged.matches({"app": "x", "rev": "1"})
    assert not merged.matches({"app": "x", "rev": "2"})


def _terms(*terms: dict[str, Any]) -> NodeSelector:
    return NodeSelector.parse({"nodeSelectorTerms": list(terms)}, "affinity")


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("selector", "name", "expected"),
    [
        (_terms(), "n1", False),  # no terms: no node
        (_terms({}), "n1", False),  # an empty term: no node
        (_terms({"matchExpressions": [_expr("zone", "In", "a")]}), "n1", True),
        (
            _terms(
                {"matchExpressions": [_expr("zone", "In", "b")]},
                {"matchExpressions": [_expr("size", "Gt", "4")]},
            ),
            "n1",
            True,
        ),  # terms ORed
        (
            _terms({"matchExpressions": [_expr("zone", "In", "a"), _expr("size", "Gt", "9")]}),
            "n1",
            False,
        ),  # requirements ANDed
        (_terms({"matchFields": [_expr("metadata.name", "In", "n1")]}), "n1", True),
        (_terms({"matchFields": [_expr("metadata.name", "In", "n1")]}), "n2", False),
        (_terms({"matchFields": [_expr("metadata.name", "NotIn", "n1")]}), "n2", True),
        (
            _terms({"matchFields": [_expr("metadata.name", "In", "n1", "n2")]}),
            "n1",
            False,
        ),  # one value
        (_terms({"matchFields": [_expr("metadata.name", "Exists")]}), "n1", False),  # In/NotIn only
        (
            _terms(
                {
                    "matchExpressions": [_expr("zone", "In", "a")],
                    "matchFields": [_expr("metadata.name", "In", "n2")],
                }
            ),
            "n1",
            False,
        ),
        (
            _terms(
                {"matchExpressions": [_expr("size", "Gt", "x")]},
                {"matchExpressions": [_expr("zone", "In", "a")]},
            ),
            "n1",
            True,
        ),  # a broken term alone fails
    ],
)
def test_node_selector(selector: NodeSelector, name: str, expected: bool) -> None:
    assert selector.matches(name, LABELS) is expected


def test_node_selector_names_a_bad_operator() -> None:
    with pytest.raises(
        SelectorError, match=r"affinity\.nodeSelectorTerms\[0\]\.matchExpressions\[0\]"
    ):
        _terms({"matchExpressions": [_expr("zone", "Near", "a")]})
