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


def test_qrmi_workload_without_credentials_says_what_it_needs_and_exits_0() -> None:
    done = _run(EXAMPLES / "qrmi-workload" / "app.py")
    assert done.returncode == 0, done.stderr
    assert "QISKIT_IBM_TOKEN" in done.stdout and "FLUXION_BACKEND" in done.stdout


def test_qaoa_scout_on_the_local_simulator_finds_a_cut() -> None:
    done = _run(EXAMPLES / "braket-qaoa" / "app.py", "--local", "--shots", "100")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["cut"] == 4  # the max cut of the 4-node graph with a chord


def test_qaoa_worker_without_a_scout_result_exits_non_zero() -> None:
    done = _run(EXAMPLES / "braket-qaoa" / "app.py", "--role", "worker")
    assert done.returncode == 1 and "no result" in done.stdout
