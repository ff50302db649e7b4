"""fluence stage lays out the Braket interceptor, matched by provider=braket."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_stage_copies_the_braket_interceptor_with_its_match(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fluence_core.cli", "stage", str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "s" / "fluence_staged" / "manifest.json").read_text())
    staged = {e["name"]: e for e in manifest["providers"]}
    assert staged["braket"]["module"] == "fluence_staged.interceptors.braket"
    assert staged["braket"]["match"] == {"provider": "braket"}
    assert (tmp_path / "s" / "fluence_staged" / "interceptors" / "braket.py").is_file()
