"""Fixtures: the Braket example file in a directory of its own, and the driver's warnings."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluence_core.api import logger
from fluence_core.testing import braket_config, fake_cluster  # noqa: F401 (fixtures)
from fluence_dra_qpu.testing import Records

REPO_ROOT = Path(__file__).resolve().parents[3]
BRAKET_CONFIG = REPO_ROOT / "config" / "resources.yaml"


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A copy of the Braket example, free to rewrite."""
    path = tmp_path / "resources.yaml"
    shutil.copyfile(BRAKET_CONFIG, path)
    return path


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
