"""fluence sim's tables: one per experiment kind, labels left-aligned, figures right-aligned."""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core.sim.report import tables

BASE = {"scenario": "s", "description": "d"}
GANGS = {**BASE, "experiment": "gang-contention", "summary": {
    "rows": [{"size": 2, "arm": "fluence", "gangs": 3, "mean_idle_per_gang": 1.0,
              "max_idle_per_gang": 2.0, "wasted_node_s": 3.0, "restarts": 0, "mean_wait": 1.5}],
    "total_wasted_node_s": {"fluence": 3.0}, "mean_makespan": {"fluence": 9.0}}}
SELECTION = {**BASE, "experiment": "selection", "summary": {
    "rows": [{"policy": "cheapest", "runs": 3, "mean_cost": 1.0, "sd_cost": 0.1,
              "mean_time_to_result": 2.0, "sd_time_to_result": 0.2, "chosen": {"sv1": 2}}]}}
MIXED = {**BASE, "experiment": "mixed", "summary": {
    "rows": [{"arm": "fluence", "done": 1, "jobs": 2, "pods_placed": 3, "mean_wait": 1.0,
              "max_wait": 2.0, "idle_node_s": 3.0, "consumer_idle_s": 4.0, "restarts": 0,
              "makespan": 5.0}]}}


@pytest.mark.parametrize(("results", "left"), [
    (GANGS, [["scheduler"], ["scheduler"]]),
    (SELECTION, [["policy", "backends chosen"]]),
    (MIXED, [["scheduler"]]),
])
def test_label_columns_are_left_aligned_and_every_other_column_right(
        results: dict[str, Any], left: list[list[str]]) -> None:
    made = tables(results)
    assert len(made) == len(left)
    for table, labels in zip(made, left):
        assert [c.header for c in table.columns if c.justify == "left"] == labels
        assert all(c.justify == "right" for c in table.columns if c.header not in labels)
        assert table.row_count == 1


def test_a_row_shows_its_figures_in_its_columns() -> None:
    (table,) = tables(SELECTION)
    cells = {c.header: list(c._cells)[0] for c in table.columns}
    assert cells["mean cost"] == "$1.00" and cells["backends chosen"] == "sv1 x2"
