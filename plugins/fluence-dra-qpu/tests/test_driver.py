"""The driver's loop: the file reread each pass, a bad file after a good one survived."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from fluence_core.api import RESOURCE_SLICES, FluenceError
from fluence_core.testing import FakeCluster
from fluence_dra_qpu.driver import QpuDriver
from fluence_dra_qpu.publisher import SlicePublisher
from fluence_dra_qpu.testing import Records


def _generations(kube: FakeCluster) -> list[int]:
    return sorted(s["spec"]["pool"]["generation"] for s in kube.list(RESOURCE_SLICES).items)


def test_an_edited_file_is_published_by_the_next_pass(
        fake_cluster: FakeCluster, config_file: Path) -> None:
    driver = QpuDriver(SlicePublisher(fake_cluster), config_file, 0.01)
    driver.step()
    config_file.write_text("resources:\n  - type: qpu\n    count: 2\n")
    result = driver.step()
    assert result is not None and result.published == {"cluster": 2}
    [published] = fake_cluster.list(RESOURCE_SLICES).items
    assert len(published["spec"]["devices"]) == 2


def test_a_file_that_breaks_after_a_good_one_keeps_the_slices_and_is_logged(
        fake_cluster: FakeCluster, config_file: Path, records: Records) -> None:
    driver = QpuDriver(SlicePublisher(fake_cluster), config_file, 0.01)
    driver.step()
    config_file.write_text("resources:\n  - type: qpu\n    count: -1\n")
    driver.step()
    assert _generations(fake_cluster) == [1]
    assert any("count must be an integer" in m and "stay" in m
               for m in records.at(logging.ERROR))


def test_a_bad_file_at_start_is_an_error_naming_it(
        fake_cluster: FakeCluster, tmp_path: Path) -> None:
    bad = tmp_path / "resources.yaml"
    bad.write_text("resources:\n  - name: no-type\n")
    driver = QpuDriver(SlicePublisher(fake_cluster), bad, 0.01)
    with pytest.raises(FluenceError, match="resources.yaml.*missing 'type'"):
        driver.step()


def test_run_passes_until_stopped(fake_cluster: FakeCluster, config_file: Path) -> None:
    driver = QpuDriver(SlicePublisher(fake_cluster), config_file, 0.01)
    stop = threading.Event()
    runner = threading.Thread(target=driver.run, args=(stop,))
    runner.start()
    try:
        while driver.passes < 3:
            stop.wait(0.01)
    finally:
        stop.set()
        runner.join(5)
    assert not runner.is_alive()
    assert _generations(fake_cluster) == [1]
