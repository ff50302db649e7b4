"""``kubectl fluence``: select from the figures Fluence keeps, friendly about anything else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fluence_core import names
from fluence_core.cli import kubectl
from fluence_core.kube.api import CONFIGMAPS
from fluence_core.kube.fake import FakeCluster
from fluence_core.runtime import figures

RESOURCES = """
resources:
  - type: qpu
    name: braket_local
    attributes: {provider: braket}
  - type: qpu
    name: fake_manila
    attributes: {provider: qrmi, vendor: ibm}
"""
FIGURES = {
    "braket_local": {"price_per_shot": 0.0, "price_per_task": 0.0, "queue": 0,
                     "status": "online", "source": "braket local", "updated": "T"},
    "fake_manila": {"price_per_shot": 0.0, "price_per_task": 0.01, "queue": 0,
                    "status": "online", "source": "qiskit-ibm-runtime local", "updated": "T"},
}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    """Fluence's two ConfigMaps in its namespace; the command connects to this cluster."""
    fake = FakeCluster()
    fake.create("namespaces", {"metadata": {"name": names.FLUENCE_NAMESPACE}})
    ref = figures.ConfigMapRef()
    fake.create(CONFIGMAPS, figures.configmap_body(ref, FIGURES, "T"), ref.namespace)
    fake.create(CONFIGMAPS, {"metadata": {"name": names.RESOURCES_CONFIGMAP,
                                          "namespace": names.FLUENCE_NAMESPACE},
                             "data": {names.RESOURCES_CONFIGMAP_KEY: RESOURCES}})
    monkeypatch.setattr("fluence_core.cli.up.connect", lambda settings: fake)
    monkeypatch.delenv("FLUENCE_RESOURCES", raising=False)
    return fake


def invoke(*args: str) -> Any:
    return CliRunner().invoke(kubectl.kubectl_app, list(args))


def test_select_reads_both_configmaps_and_keeps_the_manifests_pin(
    cluster: FakeCluster, tmp_path: Path, qrmi_pinned_pod: str
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(qrmi_pinned_pod)
    result = invoke("select", str(manifest))
    assert result.exit_code == 0, result.output
    annotations = yaml.safe_load(result.stdout)["metadata"]["annotations"]
    # braket_local is cheaper, but the manifest pins provider qrmi
    assert annotations[names.REQUIRE_BACKEND_ANNOTATION] == "fake_manila"
    assert "configmap fluence-system/fluence-backends (qiskit-ibm-runtime local, T)" in \
        annotations[names.SELECTION_ANNOTATION]


def test_without_a_manifest_the_cheapest_is_named(cluster: FakeCluster) -> None:
    result = invoke("select")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "braket_local"


def test_a_missing_configmap_is_one_error_line(cluster: FakeCluster) -> None:
    result = invoke("select", "--configmap", "figures")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: configmap fluence-system/figures does not exist")


def test_a_file_replaces_the_configmap(cluster: FakeCluster, tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("braket_local: {price_per_task: 5}\nfake_manila: {price_per_task: 1}\n")
    result = invoke("select", "--prices", str(prices))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "fake_manila"


def test_other_commands_get_a_pointer_to_fluence(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        kubectl.main(["up"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "error: kubectl fluence has no command 'up' (it has: select); Fluence's other "
        "commands are `fluence up ...` (pip install fluence-core)\n")


def test_help_names_the_select_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0 and "select" in result.stdout


def test_a_backend_the_configmap_has_no_figures_for_is_named(cluster: FakeCluster) -> None:
    ref = figures.ConfigMapRef()
    current = cluster.get(CONFIGMAPS, ref.name, ref.namespace)
    cluster.replace(CONFIGMAPS, figures.configmap_body(
        ref, {"fake_manila": FIGURES["fake_manila"]}, "T",
        current["metadata"]["resourceVersion"]), ref.namespace)
    result = invoke("select")
    assert result.exit_code == 0, result.output
    assert "warning: configmap fluence-system/fluence-backends: no figures for braket_local " \
        "(ranked on the resources config's alone)" in result.stderr
    assert result.stdout.strip() == "fake_manila"  # a known cost ranks before an unknown one
