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
    parse_pins,
    pinned_out,
    pins_of,
    rank,
    select_into_manifest,
    template_pins,
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
    pod, job = yaml.safe_load_all(
        select_into_manifest(POD + "---" + JOB, lambda pins: selection)
    )
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


# -- pins already on the manifest ---------------------------------------------------------

MIXED = """
resources:
  - type: qpu
    name: braket_sv1
    attributes: {provider: braket, region: us-east-1}
  - type: qdevice
    name: ibm_torino
    attributes: {provider: qrmi, vendor: ibm}
    with: [{type: qpu, attributes: {tier: open}}]
  - type: qpu
    name: ibm_fez
    attributes: {provider: qrmi, vendor: ibm}
"""
MIXED_FIGURES = """
braket_sv1: {price_per_task: 0.0, price_per_shot: 0.0, queue: 0, status: online}
ibm_torino: {price_per_task: 0.0, price_per_shot: 0.00016, queue: 9, status: online}
ibm_fez: {price_per_task: 0.0, price_per_shot: 0.0002, queue: 2, status: online}
"""


def _mixed(tmp_path: Path) -> tuple[Path, Path]:
    resources, prices = tmp_path / "resources.yaml", tmp_path / "figures.yaml"
    resources.write_text(MIXED)
    prices.write_text(MIXED_FIGURES)
    return resources, prices


def _choose_mixed(tmp_path: Path, pins: dict[str, str], policy: str = "min-cost"):  # type: ignore[no-untyped-def]
    resources, prices = _mixed(tmp_path)
    config = load_resource_config(resources)
    candidates = gather(config, "qpu", [], load_price_fixture(prices))
    return rank(candidates, Policy.parse(policy), 1000, "qpu", pinned_out(config, "qpu", pins))


def test_without_pins_the_cheapest_backend_of_any_provider_wins(tmp_path: Path) -> None:
    assert _choose_mixed(tmp_path, {}).chosen.backend.name == "braket_sv1"


def test_a_provider_pin_rules_out_the_other_providers_backends(tmp_path: Path) -> None:
    selection = _choose_mixed(tmp_path, {"provider": "qrmi"})
    assert selection.chosen.backend.name == "ibm_torino"
    sv1 = next(c for c in selection.ranked if c.backend.name == "braket_sv1")
    assert sv1.excluded == "require-provider=qrmi: provider is braket"


def test_a_pin_on_an_inner_vertex_attribute_is_honoured_as_the_graph_would(
    tmp_path: Path,
) -> None:
    # only torino's qpu vertex carries tier=open (fez has no tier at all)
    selection = _choose_mixed(tmp_path, {"tier": "open"}, "min-queue")
    assert selection.chosen.backend.name == "ibm_torino"
    fez = next(c for c in selection.ranked if c.backend.name == "ibm_fez")
    assert fez.excluded == "require-tier=open: tier is unset"


def test_a_backend_pin_leaves_only_that_backend(tmp_path: Path) -> None:
    selection = _choose_mixed(tmp_path, {"backend": "ibm_fez", "provider": "qrmi"})
    assert selection.chosen.backend.name == "ibm_fez"
    assert [c.excluded is None for c in selection.ranked].count(True) == 1


def test_contradictory_pins_leave_nothing(tmp_path: Path) -> None:
    assert _choose_mixed(tmp_path, {"provider": "braket", "vendor": "ibm"}).chosen is None


def test_pins_are_read_from_each_documents_pod_template() -> None:
    job = yaml.safe_load(JOB)
    job["spec"]["template"]["metadata"]["annotations"] = {
        names.REQUIRE_ANNOTATION_PREFIX + "provider": "qrmi", "other": "x"}
    assert template_pins(job["spec"]["template"]) == {"provider": "qrmi"}
    assert pins_of({names.REQUIRE_ANNOTATION_PREFIX + "region": "eu"}) == {"region": "eu"}


def test_bad_require_terms_are_named() -> None:
    assert parse_pins(["provider=qrmi", "region = eu"]) == {"provider": "qrmi", "region": "eu"}
    with pytest.raises(FluenceError, match="--require 'qrmi': expected ATTRIBUTE=VALUE"):
        parse_pins(["qrmi"])


def test_cli_select_keeps_the_manifests_provider_pin_and_plan_places_the_output(
    tmp_path: Path, qrmi_pinned_pod: str
) -> None:
    """The issue's case: require-provider: qrmi used to get a Braket backend pinned beside it,
    and `fluence plan` then said the qpu jobspec could never fit."""
    load_plugin_commands()
    resources, prices = _mixed(tmp_path)
    manifest, pinned = tmp_path / "pod.yaml", tmp_path / "pinned.yaml"
    manifest.write_text(qrmi_pinned_pod)
    result = CliRunner().invoke(app, ["select", str(manifest), "--resources", str(resources),
                                      "--prices", str(prices), "-o", str(pinned)])
    assert result.exit_code == 0, result.output
    annotations = yaml.safe_load(pinned.read_text())["metadata"]["annotations"]
    assert annotations[names.REQUIRE_BACKEND_ANNOTATION] == "ibm_torino"
    assert annotations[names.REQUIRE_ANNOTATION_PREFIX + "provider"] == "qrmi"
    nodes = Path(__file__).resolve().parents[2] / "examples" / "cluster" / "nodes.yaml"
    planned = CliRunner().invoke(app, ["plan", str(pinned), "--nodes", str(nodes),
                                       "--resources", str(resources)])
    assert planned.exit_code == 0, planned.output
    assert "ibm_torino" in planned.stdout and "never" not in planned.stdout


def test_cli_select_names_the_document_whose_pins_nothing_passes(
    tmp_path: Path, qrmi_pinned_pod: str
) -> None:
    load_plugin_commands()
    resources, prices = _mixed(tmp_path)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(qrmi_pinned_pod.replace("require-provider: qrmi", "require-provider: iqm"))
    result = CliRunner().invoke(app, ["select", str(manifest), "--resources", str(resources),
                                      "--prices", str(prices)])
    assert result.exit_code == 2
    assert "document 1 (Pod bell): no backend passes the policy with its pins " \
        "require-provider=iqm" in result.stderr


def test_cli_require_adds_pins_and_refuses_to_contradict_the_manifest(
    tmp_path: Path, qrmi_pinned_pod: str
) -> None:
    load_plugin_commands()
    resources, prices = _mixed(tmp_path)
    base = ["select", "--resources", str(resources), "--prices", str(prices)]
    alone = CliRunner().invoke(app, [*base, "--require", "provider=qrmi", "--policy", "min-queue"])
    assert alone.exit_code == 0, alone.output
    assert alone.stdout.strip() == "ibm_fez"
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(qrmi_pinned_pod)
    clash = CliRunner().invoke(app, [*base, str(manifest), "--require", "provider=braket"])
    assert clash.exit_code == 2
    assert "--require provider=braket contradicts the manifest's require-provider: qrmi" \
        in clash.stderr


def test_a_winner_whose_figure_nobody_knows_is_said_unknown_not_none() -> None:
    candidates = gather(load_resource_config(RESOURCES), "qpu", [], {})  # no prices at all
    why = rank(candidates, Policy.parse("min-cost"), 1000, "qpu").record()["why"]
    assert why.startswith("best by min-cost unknown among") and "None" not in why
