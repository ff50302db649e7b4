"""What ships: one image name everywhere, linted Containerfiles, example images holding
their examples, and a kustomization that installs every manifest once."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_core import __version__, names
from fluence_core.settings import SettingsVariables

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
LINT = REPO / ".ci" / "lint-containerfiles"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = document.get("spec", {}).get("template", {}).get("spec", document.get("spec", {}))
    return list(spec.get("containers", [])) + list(spec.get("initContainers", []))


def test_the_image_tag_is_the_core_version() -> None:
    assert names.IMAGE.endswith(f":{__version__}")


def test_manifests_settings_and_containerfile_name_the_same_image() -> None:
    assert SettingsVariables.model_fields["runtime_image"].default == names.IMAGE
    assert f"-t {names.IMAGE} " in (REPO / "Containerfile").read_text()
    seen = []
    for manifest in sorted(DEPLOY.glob("*.yaml")):
        for document in _documents(manifest):
            for container in _containers(document):
                seen.append(container["image"])
                for variable in container.get("env", []):
                    if variable["name"] == "FLUENCE_RUNTIME_IMAGE":
                        seen.append(variable["value"])
    assert len(seen) >= 4  # scheduler, webhook, its runtime image, device plugin
    assert set(seen) == {names.IMAGE}


def test_every_containerfile_passes_the_lint() -> None:
    done = subprocess.run([sys.executable, str(LINT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert "Containerfile" in done.stdout


def test_the_lint_names_file_line_and_problem(tmp_path: Path) -> None:
    bad = tmp_path / "Containerfile"
    bad.write_text("FROM python:3.11\nCOPY missing.py /app/\nCMD python app.py\n")
    done = subprocess.run([sys.executable, str(LINT), str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert f"{bad}:1: image 'python:3.11' has no registry" in done.stdout
    assert f"{bad}:2: COPY source 'missing.py' is not in the build context" in done.stdout
    assert f"{bad}:3: CMD is not in exec form" in done.stdout
    assert "runs as root" in done.stdout


@pytest.mark.parametrize("example", ["braket-qaoa", "qrmi-workload"])
def test_an_example_image_holds_the_program_its_manifest_runs(example: str) -> None:
    folder = REPO / "examples" / example
    containerfile = (folder / "Containerfile").read_text()
    (manifest,) = [p for p in folder.glob("*.yaml")]
    (container,) = [c for d in _documents(manifest) for c in _containers(d)]
    assert container["image"] == f"ghcr.io/flux-framework/fluence-example-{example}:{__version__}"
    assert f"-t {container['image']} " in containerfile
    program = next(word for word in container["command"] if word.endswith(".py"))
    copied = re.findall(r"^COPY (\S+) (\S+)$", containerfile, re.MULTILINE)
    assert (Path(program).name, program) in copied
    assert (folder / Path(program).name).is_file()


def test_the_qrmi_example_reads_the_secret_keys_upstream_uses() -> None:
    (container,) = _containers(_documents(REPO / "examples" / "qrmi-workload" / "pod.yaml")[0])
    keys = {v["name"]: v["valueFrom"]["secretKeyRef"]["key"] for v in container["env"]}
    assert keys == {"QISKIT_IBM_TOKEN": "token", "QISKIT_IBM_INSTANCE": "crn"}
    app = (REPO / "examples" / "qrmi-workload" / "app.py").read_text()
    assert all(f'os.environ["{variable}"]' in app for variable in keys)


def test_the_braket_example_reads_aws_standard_keys_from_an_optional_secret() -> None:
    (container,) = _containers(_documents(REPO / "examples" / "braket-qaoa" / "job.yaml")[0])
    assert container["envFrom"] == [{"secretRef": {"name": "aws-credentials", "optional": True}}]
    app = (REPO / "examples" / "braket-qaoa" / "app.py").read_text()
    assert "boto3.Session().get_credentials()" in app  # the SDK's own chain reads those keys


def test_the_kustomization_lists_every_manifest_and_no_object_twice() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert sorted(listed) == sorted(p.name for p in DEPLOY.glob("*.yaml")
                                    if p.name != "kustomization.yaml")
    ids = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
           for name in listed for d in _documents(DEPLOY / name)]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert ("ConfigMap", "fluence-system", "fluence-resources") in ids
    assert ids[0] == ("Namespace", None, "fluence-system")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl on PATH")
def test_kubectl_kustomize_builds_the_install() -> None:
    done = subprocess.run(["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]
    for kind in ("Namespace", "ConfigMap", "PriorityClass", "Deployment", "DaemonSet",
                 "MutatingWebhookConfiguration", "ClusterRole", "Role"):
        assert kind in kinds
