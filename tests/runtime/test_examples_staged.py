"""Each example's app under the staged runtime, as its container runs it, with no account.

``fluence stage`` fills the runtime directory as the init container does; the
app runs in ``clean_python`` (the SDKs, nothing of Fluence) with only what the
webhook puts in a scout's environment: ``PYTHONPATH`` = the runtime directory,
role, pod uid, runtime dir, and the ``FLUXION_*`` the scheduler chose. No
credentials of any kind. The sidecar's half is the real provider reading what
the staged interceptor recorded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fluence_core import names
from fluence_core.runtime.provider import Backend
from fluence_core.testing import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POD_UID = "0c5e7a1e-5c0u-7e57-a11c-5c0u7e57a11c"


def _stage(runtime: Path) -> None:
    """``fluence stage`` exactly as the webhook's init container runs it."""
    done = subprocess.run([sys.executable, "-m", "fluence_core.cli", "stage", str(runtime)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def _container_env(home: Path, **extra: str) -> dict[str, str]:
    """A container's environment: no credentials, no PYTHONPATH but what ``extra`` sets."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "AWS_EC2_METADATA_DISABLED": "true",
            **extra}


def _scout_env(runtime: Path, backend: str, attributes: dict[str, str]) -> dict[str, str]:
    """What the webhook and the scheduler give a scout's app container."""
    env = {"PYTHONPATH": str(runtime), names.ENV_ROLE: names.ROLE_SCOUT,
           names.ENV_POD_UID: POD_UID, names.ENV_RUNTIME_DIR: str(runtime),
           names.ENV_BACKEND: backend}
    env.update({names.env_name_for_attribute(k): v for k, v in attributes.items()})
    return _container_env(runtime.parent, **env)


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_braket_qaoa_runs_end_to_end_on_the_local_simulator(
    clean_python: Path, tmp_path: Path
) -> None:
    pytest.importorskip("braket.devices", reason="amazon-braket-sdk is not installed")
    pytest.importorskip("fluence_braket", reason="the fluence-braket plugin is not installed")
    from fluence_braket.provider import BraketProvider

    runtime = tmp_path / "fluence-runtime"
    _stage(runtime)
    attributes = {"provider": "braket", "local-simulator": "braket_sv"}
    app = EXAMPLES / "braket-qaoa" / "app.py"
    scout = subprocess.run([str(clean_python), str(app), "--shots", "200"],
                           env=_scout_env(runtime, "braket_local", attributes),
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    print("scout stdout:\n" + scout.stdout + "scout stderr:\n" + scout.stderr)
    assert scout.returncode == 0, scout.stderr
    submitted, result = _json_lines(scout.stdout)
    assert submitted["tags"] == {names.TASK_TAG_KEY: POD_UID}  # the staged interceptor's tag
    assert submitted["backend"] == "braket_local"
    assert result["cut"] == 4  # the max cut of the 4-node graph with a chord
    assert f"[fluence] local task {submitted['task']} tagged {names.TASK_TAG_KEY}={POD_UID}" \
        in scout.stderr

    # the sidecar's half: the local path, from the record the interceptor wrote
    provider = BraketProvider(runtime_dir=runtime)
    backend = Backend.from_attributes({"backend": "braket_local", "provider": "braket",
                                       "local_simulator": "braket_sv"})
    task = provider.refresh(provider.find_my_task(POD_UID, backend, timeout=5))
    assert task is not None and task.local
    assert provider.job_id(task) == submitted["task"] and provider.is_ready(task, 1)

    # a worker ungated with the scout's job id (workers are not staged)
    worker = subprocess.run(
        [str(clean_python), str(app), "--shots", "200"],
        env=_container_env(tmp_path, **{
            names.ENV_ROLE: names.ROLE_WORKER, names.ENV_SCOUT_JOB_ID: provider.job_id(task),
            names.ENV_SCOUT_STATUS: names.SCOUT_STATUS_READY, names.ENV_GROUP_SIZE: "4",
            "JOB_COMPLETION_INDEX": "1"}),
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    print("worker stdout:\n" + worker.stdout)
    assert worker.returncode == 0, worker.stderr
    (refined,) = _json_lines(worker.stdout)
    assert refined["scout_task"] == submitted["task"]
    assert refined["scout_result"] == "recomputed (local task)"
    assert 0 < refined["best"][0] <= 5  # an expected cut of the 5-edge graph


def test_qrmi_workload_runs_in_local_testing_mode_and_holds_its_session(
    clean_python: Path, tmp_path: Path
) -> None:
    pytest.importorskip("qiskit_ibm_runtime", reason="qiskit-ibm-runtime is not installed")
    pytest.importorskip("fluence_qrmi", reason="the fluence-qrmi plugin is not installed")
    from fluence_qrmi.provider import QrmiProvider

    runtime = tmp_path / "fluence-runtime"
    _stage(runtime)
    attributes = {"provider": "qrmi", "vendor": "ibm", "fake-backend": "FakeManilaV2"}
    env = _scout_env(runtime, "fake_manila", attributes)
    env[names.ENV_SESSION_HOLD_TIMEOUT] = "240"
    log = tmp_path / "app.stderr"
    with log.open("w") as err:  # a file, not a pipe: the test reads it while the app runs
        app = subprocess.Popen(
            [str(clean_python), str(EXAMPLES / "qrmi-workload" / "app.py"), "--shots", "100"],
            env=env, stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp_path)
    try:
        def never_asked(task: object, backend: object) -> str:
            raise AssertionError("a local job's status is its record; no service is asked")

        provider = QrmiProvider(runtime_dir=runtime, status_of=never_asked)
        backend = Backend.from_attributes({"backend": "fake_manila", "provider": "qrmi"})
        deadline = time.monotonic() + 240
        task = None
        while task is None and time.monotonic() < deadline and app.poll() is None:
            task = provider.find_my_task(POD_UID, backend, timeout=5)
            time.sleep(0.2)
        assert task is not None, "the staged interceptor recorded no job"
        task = provider.refresh(task)
        assert provider.is_ready(task, 1)
        # the scout's run is done and its session stays open for the workers until the
        # sidecar releases it (the interceptor says so when it starts to hold)
        wait_for(lambda: "holding the session" in log.read_text() or app.poll() is not None,
                 "the scout to hold its session", timeout=240, every=0.1)
        assert app.poll() is None, "the session closed before the release"
        (runtime / names.RELEASE_MARKER_FILE).write_text("ready\n")
        stdout, _ = app.communicate(timeout=240)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    stderr = log.read_text()
    print("stdout:\n" + stdout + "stderr:\n" + stderr)
    assert app.returncode == 0, stderr
    (result,) = _json_lines(stdout)
    assert result["backend"] == "fake_manila" and result["local"] is True
    assert result["job"] == provider.job_id(task)
    assert sum(result["counts"].values()) == 100
    assert "no QISKIT_IBM_TOKEN: qiskit-ibm-runtime local testing mode" in stderr
    assert f"qiskit-ibm-runtime-local job {result['job']} of pod {POD_UID} recorded" in stderr

