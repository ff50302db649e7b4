"""The runtime examples run on one machine with no account."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(
    app: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("QISKIT_IBM", "FLUXION_", "AWS_"))
    }
    return subprocess.run([sys.executable, str(app), *args], env={**clean, **(env or {})},
                          capture_output=True, text=True, timeout=300)


def test_qrmi_workload_without_a_token_runs_in_local_testing_mode() -> None:
    done = _run(EXAMPLES / "qrmi-workload" / "app.py", "--shots", "100")
    assert done.returncode == 0, done.stderr
    assert "no QISKIT_IBM_TOKEN: qiskit-ibm-runtime local testing mode" in done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["backend"] == "fake_manila" and result["local"] is True
    assert set(result["counts"]) <= {"00", "01", "10", "11"} and sum(
        result["counts"].values()) == 100


def test_qrmi_workload_with_a_token_but_no_backend_names_what_is_missing() -> None:
    done = _run(EXAMPLES / "qrmi-workload" / "app.py", env={"QISKIT_IBM_TOKEN": "t"})
    assert done.returncode == 2
    assert "FLUXION_BACKEND" in done.stderr and "QISKIT_IBM_INSTANCE" in done.stderr


def test_qaoa_scout_without_credentials_takes_the_local_simulator_and_finds_a_cut() -> None:
    done = _run(EXAMPLES / "braket-qaoa" / "app.py", "--shots", "100",
                env={"AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/none",
                     "AWS_CONFIG_FILE": "/none"})
    assert "no AWS credentials: running on the Braket local simulator" in done.stderr
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["cut"] == 4  # the max cut of the 4-node graph with a chord


def test_qaoa_worker_without_a_scout_result_exits_non_zero() -> None:
    done = _run(EXAMPLES / "braket-qaoa" / "app.py", "--role", "worker")
    assert done.returncode == 1 and "no result" in done.stdout
