"""``fluence sim`` through the real command line, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from fluence_core.cli import app, load_plugin_commands

from .conftest import CONTENTION

pytestmark = pytest.mark.usefixtures("clean_env")


def fluence(*args: str | Path) -> Result:
    if not any(c.name == "sim" for c in app.registered_commands):
        load_plugin_commands()
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_the_default_run_prints_the_comparison_and_writes_json_and_png(tmp_path: Path) -> None:
    result = fluence("sim", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    assert "fluence" in result.stdout and "first-fit" in result.stdout
    assert "simulated pods/s" in result.stdout
    data = json.loads((tmp_path / "default.json").read_text())
    arms = {row["arm"]: row for row in data["summary"]["rows"]}
    assert arms["fluence"]["done"] == arms["fluence"]["jobs"]
    assert arms["fluence"]["idle_node_s"] < arms["first-fit"]["idle_node_s"]
    png = (tmp_path / "default.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_a_scenario_file_and_a_seed(tmp_path: Path) -> None:
    scenario = tmp_path / "mine.yaml"
    scenario.write_text(CONTENTION)
    result = fluence("sim", scenario, "--seed", "9", "--no-plot", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "out" / "small-contention.json").read_text())
    assert data["seed"] == 9 and data["experiment"] == "gang-contention"
    assert not (tmp_path / "out" / "small-contention.png").exists()


def test_a_bad_scenario_is_reported_with_its_file_and_field(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: x\nworkload: [{name: a, size: 0}]\n")
    result = fluence("sim", scenario, "-o", tmp_path)
    assert result.exit_code == 2
    assert f"{scenario}: workload[0].size" in result.stderr


def test_list_shows_the_shipped_scenarios() -> None:
    result = fluence("sim", "--list")
    assert result.exit_code == 0, result.output
    for name in ("default", "gang-contention", "two-queue", "selection", "scale"):
        assert name in result.stdout
