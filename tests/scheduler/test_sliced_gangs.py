"""Sliced gangs through the scheduling cycle: placed slice by slice inside their racks, or
waiting with the reason, never in part."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fluence_core import names
from fluence_core.kube.api import PODS
from tests.scheduler.conftest import Harness, node, pod, pod_group

BLOCK = "example.com/block"
LEVELS = f"topology:\n  levels: [{BLOCK}, {names.RACK_LABEL}]\n"


def _sliced(size: str) -> dict[str, str]:
    return {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: BLOCK,
            names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
            names.KUEUE_SLICE_SIZE_ANNOTATION: size}


def _racks(*sizes: int) -> list[dict[str, Any]]:
    return [node(f"r{r}-{i}", labels={BLOCK: "x", names.RACK_LABEL: f"r{r}"})
            for r, size in enumerate(sizes) for i in range(size)]


def _reason(h: Harness, name: str) -> str:
    found = h.cluster.get(PODS, name, "default") or {}
    conditions = (found.get("status") or {}).get("conditions") or []
    return str(next((c["message"] for c in conditions if c["type"] == "PodScheduled"), ""))


def test_a_sliced_gang_is_bound_with_each_slice_inside_one_rack(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(*_racks(3, 2), pod_group("g", 4),
                        *(pod(f"g{i}", "4", group="g", annotations=_sliced("2"))
                          for i in range(4)), resources=LEVELS)
    h.cycle()
    racks = [str(h.node_of(f"g{i}")).split("-")[0] for i in range(4)]
    assert racks[0] == racks[1] and racks[2] == racks[3] and set(racks) == {"r0", "r1"}


def test_a_gang_that_is_no_multiple_of_its_slice_size_waits_and_holds_nothing(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(*_racks(4), pod_group("g", 3),
                        *(pod(f"g{i}", "1", group="g", annotations=_sliced("2"))
                          for i in range(3)), resources=LEVELS)
    h.cycle()
    assert [h.node_of(f"g{i}") for i in range(3)] == [None] * 3
    assert not h.scheduler.view.matcher.allocations()
    assert "the group has 3 pods, not a multiple of its slice size 2" in _reason(h, "g0")
