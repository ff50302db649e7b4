"""``fluence sim``: the real Fluence core on an in-memory cluster, in virtual time.

Public surface: :func:`load_scenario` / :func:`parse_scenario`, :func:`run_scenario`,
:data:`DEFAULT_SCENARIO` and :func:`available_scenarios`. The pieces:
:mod:`~fluence_core.sim.engine` (event queue, processes), :mod:`~fluence_core.sim.world`
(one run, made of :mod:`~fluence_core.sim.jobs`, :mod:`~fluence_core.sim.kubelet` and
:mod:`~fluence_core.sim.metrics`), :mod:`~fluence_core.sim.baseline` (a kube-scheduler-like
first-fit),
:mod:`~fluence_core.sim.vendor` (vendor queues behind the Provider interface),
:mod:`~fluence_core.sim.experiments` and :mod:`~fluence_core.sim.report`.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from fluence_core import yamlfile
from fluence_core.errors import FluenceError
from fluence_core.sim.experiments import run_scenario
from fluence_core.sim.scenario import Scenario, ScenarioError, load_scenario, parse_scenario

DEFAULT_SCENARIO = Path(__file__).with_name("default.yaml")
"""The short scenario ``fluence sim`` runs with no argument."""

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def available_scenarios() -> list[tuple[str, Path, str]]:
    """(name, path, description) of the built-in default and the shipped examples."""
    found = []
    paths = [DEFAULT_SCENARIO]
    for folder in (Path.cwd() / "examples" / "sim", _EXAMPLES):
        if folder.is_dir():
            paths += sorted(folder.glob("*.yaml"))
    seen = set()
    for path in paths:
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        try:
            document = yamlfile.load(yamlfile.read_text(path)) or {}
        except (FluenceError, yaml.YAMLError):
            continue
        found.append(
            (str(document.get("name", path.stem)), path, str(document.get("description", "")))
        )
    return found


__all__ = ["DEFAULT_SCENARIO", "Scenario", "ScenarioError", "available_scenarios", "load_scenario",
           "parse_scenario", "run_scenario"]
