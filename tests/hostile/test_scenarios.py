"""Hostile ``fluence sim`` scenario files: refused naming the file and the field, nothing
written outside the output folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_core.sim.scenario import ScenarioError, parse_scenario
from tests.hostile.cases import ALIAS_BOMB, Case, cases, run_fluence

pytestmark = pytest.mark.usefixtures("clean_env")

BASE = """name: ok
cluster:
  nodes: [{count: 2, cpu: 4, memory: 16Gi}]
backends:
  sv1: {type: qpu}
workload:
  - name: job
    size: 2
    cpu: 1
    memory: 1Gi
"""


def with_(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new)


CASES = [
    Case("name-parent-path", with_("name: ok", "name: ../../x"), "name: String should match"),
    Case("name-absolute", with_("name: ok", "name: /etc/cron.d/x"), "name: String should match"),
    Case("name-dotdot", with_("name: ok", "name: '..'"), "name: String should match"),
    Case("name-slash", with_("name: ok", "name: a/b"), "name: String should match"),
    Case("name-empty", with_("name: ok", "name: ''"), "name: String should match"),
    Case(
        "name-too-long", with_("name: ok", "name: " + "n" * 101), "name: String should have at most"
    ),
    Case("name-number", with_("name: ok", "name: 5"), "name: Input should be a valid string"),
    Case("name-missing", with_("name: ok\n", ""), "name: Field required"),
    Case(
        "nodes-count-huge",
        with_("count: 2", "count: 1000000000"),
        r"cluster\.nodes\[0\]\.count: Input should be less than or equal to 10000",
    ),
    Case(
        "nodes-in-all-too-many",
        with_(
            "nodes: [{count: 2, cpu: 4, memory: 16Gi}]",
            "nodes: [{count: 9000}, {count: 9000, prefix: b}]",
        ),
        "18000 nodes in all; the limit is 10000",
    ),
    Case("node-cpu-negative", with_("cpu: 4", "cpu: -4"), r"cluster\.nodes\[0\]\.cpu"),
    Case("node-cpu-huge", with_("cpu: 4", "cpu: 1000000"), r"cluster\.nodes\[0\]\.cpu"),
    Case(
        "node-memory-bad",
        with_("memory: 16Gi", "memory: lots"),
        r"cluster\.nodes\[0\]\.memory: not a Kubernetes quantity",
    ),
    Case("node-memory-1e5000", with_("memory: 16Gi", "memory: '1e5000'"), "too large"),
    Case(
        "node-memory-float",
        with_("memory: 16Gi", "memory: 1e5000"),
        r"cluster\.nodes\[0\]\.memory: Input should be a valid string",
    ),
    Case(
        "node-prefix-path",
        with_("memory: 16Gi}", "memory: 16Gi, prefix: ../n}"),
        r"cluster\.nodes\[0\]\.prefix: String should match",
    ),
    Case("job-cpu-1e18", with_("cpu: 1\n", "cpu: 1e18\n"), r"workload\[0\]\.cpu: .*too large"),
    Case("job-cpu-1e10000000", with_("cpu: 1\n", "cpu: '1e10000000'\n"), "too large"),
    Case("job-cpu-text", with_("cpu: 1\n", "cpu: much\n"), "not a Kubernetes quantity"),
    Case("job-memory-negative", with_("memory: 1Gi", "memory: -1Gi"), "negative"),
    Case("job-size-zero", with_("size: 2", "size: 0"), r"workload\[0\]\.size"),
    Case(
        "pods-in-all-too-many", with_("size: 2", "size: 100000\n    count: 3"), "300000 pods in all"
    ),
    Case("repeats-huge", BASE + "repeats: 100000000\n", "repeats: Input should be less than"),
    Case(
        "backend-name-path",
        with_("sv1: {type: qpu}", "../sv1: {type: qpu}"),
        "backends: '../sv1' must be",
    ),
    Case("unknown-key", BASE + "colour: red\n", "colour: Extra inputs are not permitted"),
    Case("duplicate-key", BASE + "name: again\n", "key 'name' appears twice"),
    Case("not-a-mapping", "- name: ok\n", "expected a mapping"),
    Case("not-yaml", "name: [\n", "not valid YAML"),
    Case(
        "alias-bomb",
        ALIAS_BOMB,
        "expands to more than",
    ),
]


@pytest.mark.parametrize("case", cases(CASES))
def test_a_hostile_scenario_is_refused_naming_file_and_field(case: Case) -> None:
    with pytest.raises(ScenarioError, match=case.expect) as caught:
        parse_scenario(case.input, "hostile.yaml")
    assert str(caught.value).startswith("hostile.yaml")


def test_yaml_1_1_words_stay_strings_in_a_scenario() -> None:
    scenario = parse_scenario(with_("name: ok", "name: yes\ndescription: on"), "s.yaml")
    assert (scenario.name, scenario.description) == ("yes", "on")


def test_the_base_scenario_is_valid() -> None:
    assert parse_scenario(BASE, "s.yaml").name == "ok"


@pytest.mark.parametrize("name", ["../escaped", "../../tmp/escaped", "/tmp/escaped-abs"])
def test_the_command_writes_nothing_outside_the_output_folder(name: str, tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(with_("name: ok", f"name: '{name}'"))
    out = tmp_path / "deep" / "out"
    code, output, _ = run_fluence("sim", str(scenario), "-o", str(out), "--no-plot")
    assert code == 2, output
    assert "name: String should match" in output
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["s.yaml"]
