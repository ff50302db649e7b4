"""Scenario files: shipped ones load; bad ones fail naming the file and the field."""

from __future__ import annotations

import pytest

from fluence_core.resource_config import parse_resource_config
from fluence_core.sim import DEFAULT_SCENARIO, available_scenarios, load_scenario, parse_scenario
from fluence_core.sim.scenario import ScenarioError, resources_yaml

from .conftest import EXAMPLES, TWO_QUEUE


@pytest.mark.parametrize(
    "path", [DEFAULT_SCENARIO, *sorted(EXAMPLES.glob("*.yaml"))], ids=lambda p: p.name
)
def test_every_shipped_scenario_is_valid(path) -> None:  # type: ignore[no-untyped-def]
    scenario = load_scenario(path)
    assert scenario.source == str(path)
    parse_resource_config(resources_yaml(scenario), "generated")


def test_the_list_names_the_default_and_the_examples() -> None:
    found = {name for name, _, _ in available_scenarios()}
    assert {"default", "gang-contention", "two-queue", "selection", "scale"} <= found


@pytest.mark.parametrize(
    "text, field",
    [
        ("name: x\nworkload: [{name: a, sizes: [1, 0]}]", "workload[0].sizes"),
        ("name: x\nworkload: [{name: a}]", "workload[0]: give exactly one of 'size' or 'sizes'"),
        ("name: x\nworkload: [{name: a, size: 1, colour: red}]", "workload[0].colour"),
        ("name: x\nschedulers: [kube]\nworkload: [{name: a, size: 1}]", "schedulers[0]"),
        (
            "name: x\nworkload: [{name: a, size: 1, runtime: {min: 5, max: 1}}]",
            "workload[0].runtime",
        ),
        (
            "name: x\ncluster: {nodes: [{count: 0}]}\nworkload: [{name: a, size: 1}]",
            "cluster.nodes[0].count",
        ),
        (
            "name: x\nworkload: [{name: a, size: 1, quantum: {backend: nope}}]",
            "workload[0].quantum.backend",
        ),
        ("name: x\npolicies: [cheapest]\nworkload: [{name: a, size: 1}]", "policies"),
        ("name: x\nexperiment: two-queue\nworkload: [{name: a, size: 1}]", "sweep"),
        ("workload: [{name: a, size: 1}]", "name: Field required"),
    ],
)
def test_a_bad_field_is_named_with_the_file(text: str, field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "bad.yaml")
    message = str(caught.value)
    assert message.startswith("bad.yaml: ")
    assert field in message


def test_a_missing_file_and_bad_yaml_are_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScenarioError, match="missing.yaml: cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="bad.yaml: not valid YAML"):
        load_scenario(bad)


def test_a_two_queue_sweep_must_name_known_backends() -> None:
    text = TWO_QUEUE.replace("backends: [quick, slow]", "backends: [quick, fast]")
    with pytest.raises(ScenarioError, match=r"sweep.backends: \['fast'\]"):
        parse_scenario(text, "tq.yaml")
