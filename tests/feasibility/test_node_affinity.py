"""NodeName and NodeAffinity (nodeSelector + required node affinity)."""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core.feasibility.node_affinity import NodeAffinity
from fluence_core.feasibility.node_name import NodeName
from tests.feasibility.kube_objects import node, pod, refusals, snapshot

ZONES = [node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b", "ssd": "yes"}),
         node("bare")]
MISS = ("node(s) didn't match Pod's node affinity/selector",)


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(("spec", "fits"), [
    ({}, {"a1", "b1", "bare"}),
    ({"nodeSelector": {"zone": "b"}}, {"b1"}),
    ({"nodeSelector": {"zone": "b", "ssd": "no"}}, set()),
    ({"affinity": _required({"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["b"]}]})}, {"b1"}),
    ({"affinity": _required({"matchExpressions": [
        {"key": "zone", "operator": "NotIn", "values": ["b"]}]})}, {"a1", "bare"}),
    ({"affinity": _required(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["bare"]}]})},
     {"a1", "bare"}),
    # nodeSelector and affinity must both hold
    ({"nodeSelector": {"ssd": "yes"}, "affinity": _required({"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]})}, set()),
    ({"affinity": _required({})}, set()),                         # an empty term selects nothing
    # preferred terms never refuse
    ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z"]}]}}]}}}, {"a1", "b1", "bare"}),
])
def test_node_affinity(spec: dict[str, Any], fits: set[str]) -> None:
    result = refusals(NodeAffinity(), pod("p", **spec), snapshot(ZONES))
    assert {n for n, reasons in result.items() if not reasons} == fits
    assert all(reasons == MISS for n, reasons in result.items() if n not in fits)


def test_node_name() -> None:
    result = refusals(NodeName(), pod("p", node_name="b1"), snapshot(ZONES))
    assert result == {"a1": ("node(s) didn't match the requested node name",), "b1": (),
                      "bare": ("node(s) didn't match the requested node name",)}


def test_no_node_name_allows_every_node() -> None:
    assert all(not r for r in refusals(NodeName(), pod("p"), snapshot(ZONES)).values())
