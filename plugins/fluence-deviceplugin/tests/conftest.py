"""Fixtures: short socket directories, a fake kubelet, a manager running in a thread.

Socket directories are made directly under /tmp because a unix socket path may
not exceed 107 bytes and pytest's tmp_path can be longer.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from fluence_core.api import logger
from fluence_deviceplugin.manager import DevicePluginManager
from fluence_deviceplugin.testing import FakeKubelet, LogRecords, RunningManager

REPO_ROOT = Path(__file__).resolve().parents[3]
BRAKET_CONFIG = REPO_ROOT / "config" / "resources.yaml"
CAPACITY = 5


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fdp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def plugin_dir(short_dir: Path) -> Path:
    path = short_dir / "dp"
    path.mkdir()
    return path


@pytest.fixture
def config_file(short_dir: Path) -> Path:
    """A copy of the Braket example in its own directory, free to rewrite."""
    path = short_dir / "config" / "resources.yaml"
    path.parent.mkdir()
    shutil.copyfile(BRAKET_CONFIG, path)
    return path


@pytest.fixture
def kubelet(plugin_dir: Path) -> Iterator[FakeKubelet]:
    fake = FakeKubelet(plugin_dir)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def log_records() -> Iterator[LogRecords]:
    handler = LogRecords()
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)




@pytest.fixture
def make_manager(plugin_dir: Path, config_file: Path) -> Iterator[Callable[..., "RunningManager"]]:
    """Start a manager over ``config_file``. The periodic tick is set far beyond
    any test's length, so every reaction a test sees came from a file event."""
    running: list[RunningManager] = []

    def make(**overrides: object) -> RunningManager:
        options: dict[str, object] = dict(
            tick_ms=600_000, debounce_ms=100, step_ms=20, register_timeout=2.0
        )
        options.update(overrides)
        manager = DevicePluginManager(plugin_dir, config_file, CAPACITY, **options)  # type: ignore[arg-type]
        runner = RunningManager(manager)
        running.append(runner)
        return runner.start()

    yield make
    for runner in running:
        runner.stop()
