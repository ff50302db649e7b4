"""The hybrid example both flows play, in memory (``tests/hybrid/test_flow.py``) and on a real
API server (``tests/e2e/test_hybrid_flow_e2e.py``, ``test_orphan_sweep_e2e.py``): one
simulated device and the scout's task in the fake vendor queue."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

from fluence_core.runtime.fake_provider import QUEUED, RUNNING
from fluence_core.settings import Settings, load_settings

RESOURCES = """
resources:
  - type: qdevice
    name: sim_qpu
    attributes: {provider: fake, region: sim-1, device-arn: "arn:fake:device/sim"}
    with:
      - type: qpu
"""
"""``resources.yaml``: the device ``sim_qpu`` of the fake provider, one QPU."""

SCRIPT = [
    (0.0, 7, QUEUED),
    (25.0, 4, QUEUED),
    (45.0, 2, QUEUED),
    (62.0, 1, QUEUED),
    (95.0, None, RUNNING),
]
"""The scout's task in the vendor queue: (from virtual second, position, state)."""


def sidecar_settings_from(monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str]) -> Settings:
    """The settings the sidecar reads when ``env`` (its container's, as injected) is its
    whole environment: every ``FLUENCE_*`` and ``FLUXION_*`` variable of this shell is
    dropped first, so nothing the test runner has set leaks in."""
    for variable in list(os.environ):
        if variable.startswith(("FLUENCE_", "FLUXION_")):
            monkeypatch.delenv(variable)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    return load_settings()
