"""Tolerations, NodeUnschedulable and TaintToleration."""

from __future__ import annotations

import pytest

from fluence_core.feasibility.node_unschedulable import NodeUnschedulable
from fluence_core.feasibility.facts import Taint, Toleration
from fluence_core.feasibility.taint_toleration import TaintToleration
from fluence_core.feasibility.taints import first_untolerated, tolerates
from tests.feasibility.kube_objects import node, pod, refusals, snapshot

GPU = Taint("gpu", "true", "NoSchedule")


@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    (Toleration("gpu", "Equal", "true", "NoSchedule"), GPU, True),
    (Toleration("gpu", "", "true", "NoSchedule"), GPU, True),         # empty operator is Equal
    (Toleration("gpu", "Equal", "false", "NoSchedule"), GPU, False),
    (Toleration("gpu", "Exists", "", "NoSchedule"), GPU, True),
    (Toleration("gpu", "Exists", "", ""), GPU, True),                 # empty effect: every effect
    (Toleration("gpu", "Exists", "", "NoExecute"), GPU, False),
    (Toleration("", "Exists", "", ""), GPU, True),                    # tolerates everything
    (Toleration("other", "Exists", "", ""), GPU, False),
    (Toleration("", "Equal", "true", ""), GPU, True),                 # empty key: any key
    (Toleration("level", "Lt", "5", ""), Taint("level", "3", "NoSchedule"), True),
    (Toleration("level", "Lt", "3", ""), Taint("level", "3", "NoSchedule"), False),
    (Toleration("level", "Gt", "2", ""), Taint("level", "3", "NoSchedule"), True),
    (Toleration("level", "Gt", "3", ""), Taint("level", "3", "NoSchedule"), False),
    (Toleration("level", "Gt", "2", ""), Taint("level", "high", "NoSchedule"), False),
    (Toleration("level", "Gt", "x", ""), Taint("level", "3", "NoSchedule"), False),
    (Toleration("gpu", "Near", "true", ""), GPU, False),              # unknown operator
])
def test_tolerates(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_prefer_no_schedule_never_blocks() -> None:
    assert first_untolerated([Taint("soft", "", "PreferNoSchedule")], []) is None


def test_first_untolerated_is_in_the_nodes_order() -> None:
    taints = [Taint("a", "1", "NoExecute"), Taint("b", "2", "NoSchedule")]
    assert first_untolerated(taints, []) == taints[0]
    assert first_untolerated(taints, [Toleration("a", "Exists")]) == taints[1]


GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
TOLERATE_GPU = [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("tolerations", "expected"), [
    ([], {"plain": (), "gpu": ("node(s) had untolerated taint {gpu: true}",),
          "soft": ()}),
    (TOLERATE_GPU, {"plain": (), "gpu": (), "soft": ()}),
])
def test_taint_toleration(
    tolerations: list[dict[str, str]], expected: dict[str, tuple[str, ...]]
) -> None:
    snap = snapshot([
        node("plain"),
        node("gpu", taints=[GPU_TAINT]),
        node("soft", taints=[{"key": "x", "value": "y", "effect": "PreferNoSchedule"}]),
    ])
    assert refusals(TaintToleration(), pod("p", tolerations=tolerations), snap) == expected


def test_no_execute_taint_blocks_too() -> None:
    snap = snapshot([node("n", taints=[{"key": "k", "value": "", "effect": "NoExecute"}])])
    assert refusals(TaintToleration(), pod("p"), snap) == {
        "n": ("node(s) had untolerated taint {k: }",)
    }


@pytest.mark.parametrize(
    ("tolerations", "refused"),
    [
        ([], True),
        (
            [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ],
            False,
        ),
        ([{"operator": "Exists"}], False),
        (
            [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                }
            ],
            True,
        ),
    ],
)
def test_node_unschedulable(tolerations: list[dict[str, str]], refused: bool) -> None:
    snap = snapshot([node("cordoned", unschedulable=True), node("open")])
    result = refusals(NodeUnschedulable(), pod("p", tolerations=tolerations), snap)
    assert result["open"] == ()
    assert result["cordoned"] == (("node(s) were unschedulable",) if refused else ())
