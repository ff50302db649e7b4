"""Hostile device-plugin configs: refused at start naming the fault; after start, a bad
edit is logged and the last good set of types keeps being served, sockets and all."""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluence_core.errors import FluenceError
from fluence_deviceplugin.manager import DevicePluginManager
from tests.hostile.cases import ALIAS_BOMB, Case, cases

GOOD = "resources:\n  - type: qdevice\n    with: [{type: qpu}]\n"

CASES = [
    Case("type-dotdot", "resources: [{type: ..}]\n", r"type '\.\.' must be"),
    Case("type-slash", "resources: [{type: ../../kubelet}]\n", "type '../../kubelet' must be"),
    Case("type-socket-name", "resources: [{type: kubelet.sock/x}]\n", "must be at most 63"),
    Case("type-too-long", "resources: [{type: " + "q" * 120 + "}]\n", "must be at most 63"),
    Case("type-space", "resources: [{type: 'q pu'}]\n", "type 'q pu' must be"),
    Case("type-number", "resources: [{type: 5}]\n", "type must be a string"),
    Case("count-zero", "resources: [{type: qpu, count: 0}]\n", "count must be an integer from 1"),
    Case(
        "count-billion", "resources: [{type: qpu, count: 1000000000}]\n", "count must be an integer"
    ),
    Case("duplicate-names", "resources: [{type: qpu}, {type: qpu}]\n", "already used"),
    Case("not-yaml", "resources: [\n", "not valid YAML"),
    Case("not-a-mapping", "[qpu]\n", "expected a mapping"),
    Case(
        "alias-bomb",
        ALIAS_BOMB
        + "resources: []\n",
        "expands to more than",
    ),
    Case("too-deep", "resources: " + "[" * 80 + "]" * 80 + "\n", "nested deeper"),
    Case("collide-env", "resources: [{type: q, attributes: {a-b: 1, a_b: 2}}]\n", "FLUXION_A_B"),
]


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fdh-", dir="/tmp"))  # unix socket paths are short
    (path / "dp").mkdir()
    (path / "config").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _sockets(plugin_dir: Path) -> list[str]:
    return sorted(p.name for p in plugin_dir.iterdir())


@pytest.mark.parametrize("case", cases(CASES))
def test_a_hostile_config_is_refused_at_start_naming_the_fault(case: Case, folder: Path) -> None:
    config = folder / "config" / "resources.yaml"
    config.write_text(case.input)
    manager = DevicePluginManager(folder / "dp", config, 10)
    with pytest.raises(FluenceError, match=case.expect):
        manager.start()
    assert _sockets(folder / "dp") == [], "nothing is served from a refused config"


@pytest.mark.parametrize("case", cases(CASES))
def test_a_hostile_edit_keeps_the_last_good_types_served(
    case: Case, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = folder / "config" / "resources.yaml"
    config.write_text(GOOD)
    manager = DevicePluginManager(folder / "dp", config, 10)
    manager.start()
    try:
        config.write_text(case.input)
        with caplog.at_level(logging.ERROR, logger="fluence"):
            manager.reconcile()
        messages = [r.getMessage() for r in caplog.records]
        assert any(
            "keeping types ['qdevice', 'qpu']" in m and re.search(case.expect, m) for m in messages
        ), messages
        assert manager.types == ["qdevice", "qpu"]
        assert _sockets(folder / "dp") == ["fluence-qdevice.sock", "fluence-qpu.sock"]
        config.write_text(GOOD.replace("qpu", "qbit"))
        manager.reconcile()
        assert manager.types == ["qdevice", "qbit"], "the next good edit still applies"
    finally:
        manager.close()
