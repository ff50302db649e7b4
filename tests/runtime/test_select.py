"""``fluence select``: rank a type's backends by policy and pin the winner on a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fluence_core import names
from fluence_core.cli import app, load_plugin_commands
from fluence_core.errors import FluenceError
from fluence_core.resource_config import load_resource_config
from fluence_core.runtime.select import (
    Policy,
    gather,
    load_price_fixture,
    rank,
    select_into_manifest,
)

FIXTURES = Path(__file__).with_name("fixtures")
RESOURCES = FIXTURES / "resources-qpus.yaml"
PRICES = FIXTURES / "prices.yaml"
POD = """
apiVersion: v1
kind: Pod
metadata: {name: scout}
spec:
  schedulerName: fluence
  containers: [{name: app, image: python:3.11}]
"""
JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: qaoa}
spec:
  template:
    metadata: {labels: {app: qaoa}}
    spec: {containers: [{name: app, image: python:3.11}], restartPolicy: Never}
"""


def choose(policy: str, shots: int = 1000, resource_type: str = "qpu"):  # type: ignore[no-untyped-def]
    candidates = gather(
        load_resource_config(RESOURCES), resource_type, [], load_price_fixture(PRICES)
    )
    return rank(candidates, Policy.parse(policy), shots, resource_type)


def test_min_cost_picks_the_cheapest_estimate() -> None:
    # 1000 shots: torino 0.16, cepheus 0.725, garnet 1.75
    assert choose("min-cost").chosen.backend.name == "ibm_torino"


def test_online_only_excludes_offline_backends() -> None:
    selection = choose("min-cost,online-only")
    assert selection.chosen.backend.name == "rigetti_cepheus"
    torino = next(c for c in selection.ranked if c.backend.name == "ibm_torino")
    assert torino.excluded == "status offline is not online"


def test_min_queue_and_max_qubits() -> None:
    assert choose("min-queue").chosen.backend.name == "iqm_garnet"
    assert choose("max-qubits").chosen.backend.name == "ibm_torino"


def test_thresholds_compare_numbers() -> None:
    assert choose("min-cost,max-cost=0.1").chosen is None
    assert choose("min-cost,max-cost=0.1", shots=100).chosen.backend.name == "ibm_torino"  # 0.016
    assert choose("max-qubits,max-queue=50").chosen.backend.name == "rigetti_cepheus"
    assert choose("min-cost,min-qubits=100,online-only").chosen.backend.name == "rigetti_cepheus"


def test_only_backends_of_the_asked_type_compete() -> None:
    assert [c.backend.name for c in choose("min-cost", resource_type="gpu-sim").ranked] == ["sv1"]


def test_unknown_value_is_excluded_by_a_threshold_and_ranked_last() -> None:
    selection = choose("min-cost,max-cost=5", resource_type="gpu-sim")
    assert selection.chosen is None and selection.ranked[0].excluded == "max-cost=5: value unknown"


def test_bad_policy_terms_are_named() -> None:
    with pytest.raises(FluenceError, match="unknown policy term 'cheapest'"):
        Policy.parse("cheapest")
    with pytest.raises(FluenceError, match="'a lot' is not a number"):
        Policy.parse("max-cost=a lot")


def test_choice_and_record_are_written_on_a_pod_and_a_job_template() -> None:
    selection = choose("min-cost,online-only")
    pod, job = yaml.safe_load_all(select_into_manifest(POD + "---" + JOB, selection))
    for found in (
        pod["metadata"]["annotations"],
        job["spec"]["template"]["metadata"]["annotations"],
    ):
        assert found[names.REQUIRE_BACKEND_ANNOTATION] == "rigetti_cepheus"
        record = json.loads(found[names.SELECTION_ANNOTATION])
        assert record["chosen"] == "rigetti_cepheus" and record["policy"] == "min-cost,online-only"
        assert {c["backend"] for c in record["candidates"]} == {
            "rigetti_cepheus",
            "iqm_garnet",
            "ibm_torino",
        }
    assert job["spec"]["template"]["metadata"]["labels"] == {"app": "qaoa"}


def test_cli_select_picks_the_cheapest_from_the_price_fixture(tmp_path) -> None:
    load_plugin_commands()
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    result = CliRunner().invoke(app, ["select", str(manifest), "--resources", str(RESOURCES),
                                      "--prices", str(PRICES), "--policy", "min-cost"])
    assert result.exit_code == 0, result.output
    print(result.output)
    written = next(d for d in yaml.safe_load_all(result.stdout) if d)
    assert written["metadata"]["annotations"][names.REQUIRE_BACKEND_ANNOTATION] == "ibm_torino"
