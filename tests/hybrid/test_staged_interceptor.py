"""A staged directory makes a fresh, unmodified ``python app.py`` tag its Braket tasks.

The interpreter is ``clean_python`` (conftest.py): it sees the vendor SDK and
nothing of Fluence but the staged directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

from fluence_core.hybrid.stage import stage

pytest.importorskip("braket.aws")
pytest.importorskip("fluence_braket")  # an optional plugin: without it there is nothing to stage
from fluence_braket.provider import BraketProvider  # noqa: E402

APP = Path(__file__).with_name("app_braket.py")


def _run(
    python: Path, staged: Path | None, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "AWS_EC2_METADATA_DISABLED": "true", **env}
    if staged is not None:
        clean["PYTHONPATH"] = str(staged)
    return subprocess.run(
        [str(python), str(APP)], env=clean, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_fresh_interpreter_with_the_staged_dir_tags_the_creation_request(
    clean_python, tmp_path
) -> None:
    staged = tmp_path / "staged"
    stage(staged, [BraketProvider()])
    done = _run(clean_python, staged, {"FLUENCE_POD_UID": "7d3c-uid", "FLUXION_PROVIDER": "braket",
                                       "FLUXION_BACKEND": "rigetti_cepheus"}, tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    print("request at the AWS API boundary:", json.dumps(seen["request"], indent=2))
    assert seen["request"]["tags"] == {"fluence-pod-uid": "7d3c-uid"}
    assert seen["fluence_core_importable"] is False  # only the staged copy ran


def test_without_the_staged_dir_the_same_program_sends_no_tag(clean_python, tmp_path) -> None:
    done = _run(clean_python, None, {"FLUENCE_POD_UID": "7d3c-uid"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tags" not in json.loads(done.stdout.strip().splitlines()[-1])["request"]


def test_another_providers_pod_is_left_untagged(clean_python, tmp_path) -> None:
    staged = tmp_path / "staged"
    stage(staged, [BraketProvider()])
    done = _run(
        clean_python, staged, {"FLUENCE_POD_UID": "u", "FLUXION_PROVIDER": "qrmi"}, tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "tags" not in json.loads(done.stdout.strip().splitlines()[-1])["request"]


def test_missing_sdk_fails_soft(tmp_path) -> None:
    """A plain interpreter without the SDK still runs the user's program untouched."""
    staged = tmp_path / "staged"
    stage(staged, [BraketProvider()])
    root = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    app = tmp_path / "hello.py"
    app.write_text("import fluence_staged, json; print(json.dumps(fluence_staged.installed))\n")
    done = subprocess.run([str(root / "bin" / "python"), str(app)],
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(staged),
                               "FLUENCE_POD_UID": "u", "FLUXION_PROVIDER": "braket"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"braket": False}
    assert done.stderr == ""


def test_an_existing_sitecustomize_still_runs(clean_python, tmp_path) -> None:
    staged = tmp_path / "staged"
    stage(staged, [BraketProvider()])
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os; os.environ['THEIRS_RAN'] = '1'\n")
    app = tmp_path / "check.py"
    app.write_text(
        "import os, fluence_staged; print(os.environ.get('THEIRS_RAN'), fluence_staged.installed)\n"
    )
    done = subprocess.run(
        [str(clean_python), str(app)],
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{staged}{os.pathsep}{theirs}",
            "FLUENCE_POD_UID": "u",
            "FLUXION_PROVIDER": "braket",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "{'braket':", "True}"]
