"""Same seed, same results; another seed, other results."""

from __future__ import annotations

from typing import Any

from fluence_core.sim import run_scenario
from fluence_core.sim.scenario import Scenario


def _outcome(results: dict[str, Any]) -> Any:
    return results["summary"], [
        (r["arm"], r["jobs"], r["run"]["events"], r["run"]["end"]) for r in results["runs"]
    ]


def test_the_same_seed_gives_the_same_results(contention: Scenario) -> None:
    assert _outcome(run_scenario(contention)) == _outcome(run_scenario(contention))


def test_the_same_seed_gives_the_same_hybrid_results(two_queue: Scenario) -> None:
    small = two_queue.model_copy(update={"repeats": 1})
    assert _outcome(run_scenario(small)) == _outcome(run_scenario(small))


def test_another_seed_gives_other_results(contention: Scenario) -> None:
    other = contention.model_copy(update={"seed": contention.seed + 1})
    assert _outcome(run_scenario(contention)) != _outcome(run_scenario(other))
