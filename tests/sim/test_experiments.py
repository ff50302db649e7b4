"""Each experiment's direction of effect, from mechanics alone, on small scenarios."""

from __future__ import annotations

from fluence_core.sim import run_scenario
from fluence_core.sim.scenario import Scenario


def test_fluence_wastes_far_less_node_time_on_gangs_than_first_fit(contention: Scenario) -> None:
    summary = run_scenario(contention)["summary"]
    totals = summary["total_wasted_node_s"]
    assert totals["first-fit"] > 5 * totals["fluence"]
    by_cell = {(r["size"], r["arm"]): r for r in summary["rows"]}
    assert (
        by_cell[(1, "fluence")]["wasted_node_s"] == by_cell[(1, "first-fit")]["wasted_node_s"] == 0
    )
    # Fluence's members idle only for the start-up skew of one placement (2-8 s each)
    assert by_cell[(4, "fluence")]["max_idle_per_gang"] <= 3 * 6


def test_gated_workers_idle_less_than_ungated_ones_in_every_cell(two_queue: Scenario) -> None:
    rows = run_scenario(two_queue)["summary"]["rows"]
    for row in rows:
        assert row["fluence"] < row["gang-ungated"], row
    slow = [r for r in rows if r["backend"] == "slow"]
    quick = [r for r in rows if r["backend"] == "quick"]
    # the longer the vendor queue, the larger Fluence's advantage
    assert min(r["ratio_gang-ungated"] for r in slow) > max(r["ratio_gang-ungated"] for r in quick)


def test_min_cost_selection_costs_less_than_random(selection_scenario: Scenario) -> None:
    rows = {r["policy"]: r for r in run_scenario(selection_scenario)["summary"]["rows"]}
    assert rows["min-cost"]["chosen"] == {"cheap": 4}
    assert rows["min-cost"]["mean_cost"] < rows["random"]["mean_cost"]
    assert rows["min-queue"]["mean_time_to_result"] <= rows["min-cost"]["mean_time_to_result"]
