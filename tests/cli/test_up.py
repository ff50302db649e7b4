"""``fluence up``'s resources-file watch: valid edits apply live, invalid ones are ignored."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from fluence_core.cli.up import watch_resources
from fluence_core.resource_config import ResourceConfig


class Recorder:
    def __init__(self) -> None:
        self.configs: list[ResourceConfig] = []
        self.changed = threading.Event()

    def reload_config(self, config: ResourceConfig) -> None:
        self.configs.append(config)
        self.changed.set()


def _wait_quiet(recorder: Recorder, seconds: float) -> None:
    recorder.changed.wait(seconds)


def test_a_valid_edit_is_applied_and_an_invalid_one_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "resources.yaml"
    path.write_text("resources:\n  - {type: qpu, name: a}\n")
    recorder = Recorder()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_resources, args=(path, recorder, stop), daemon=True)
    watcher.start()
    time.sleep(0.5)  # let the watcher arm before the first edit
    try:
        path.write_text("resources:\n  - {type: qpu, name: a}\n  - {type: qpu, name: b}\n")
        assert recorder.changed.wait(10), "a valid edit was not applied"
        assert [r.name for r in recorder.configs[-1].resources] == ["a", "b"]
        recorder.changed.clear()
        path.write_text("resources:\n  - {name: no-type}\n")
        _wait_quiet(recorder, 2)
        assert len(recorder.configs) == 1, "an invalid edit must keep the old graph"
        path.write_text("resources: []\n")
        assert recorder.changed.wait(10)
        assert recorder.configs[-1].resources == ()
    finally:
        stop.set()
        watcher.join(timeout=10)


def test_the_lease_goes_where_kube_scheduler_keeps_its_own_out_of_cluster(tmp_path: Path) -> None:
    from fluence_core.cli.up import lease_namespace
    from fluence_core.settings import Settings

    nowhere = tmp_path / "namespace"
    assert lease_namespace(Settings(), nowhere) == "kube-system"
    nowhere.write_text("fluence-system\n")
    assert lease_namespace(Settings(), nowhere) == "fluence-system"  # in cluster: its own
    assert lease_namespace(Settings(lease_namespace="elsewhere"), nowhere) == "elsewhere"
