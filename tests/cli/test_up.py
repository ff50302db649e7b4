"""``fluence up``'s resources-file watch: valid edits apply live, invalid ones are ignored."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fluence_core.cli import up
from fluence_core.resource_config import ResourceConfig
from fluence_core.testing import wait_for


class Recorder:
    """The scheduler's side of the watch: the configs it was given to reload."""

    def __init__(self) -> None:
        self.configs: list[ResourceConfig] = []
        self.changed = threading.Event()

    def reload_config(self, config: ResourceConfig) -> None:
        self.configs.append(config)
        self.changed.set()

    def names(self) -> list[list[str]]:
        return [[r.name for r in config.resources] for config in self.configs]


VALID = "resources:\n  - {type: qpu, name: a}\n  - {type: qpu, name: b}\n"


def test_a_valid_edit_is_applied_and_an_invalid_one_is_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "resources.yaml"
    path.write_text("resources:\n  - {type: qpu, name: a}\n")
    recorder = Recorder()
    refused = threading.Event()
    applying = up.apply_resources

    def noting_refusals(path: Path, scheduler: Recorder) -> bool:
        applied = applying(path, scheduler)
        if not applied:
            refused.set()
        return applied

    monkeypatch.setattr(up, "apply_resources", noting_refusals)
    stop = threading.Event()
    watcher = threading.Thread(target=up.watch_resources, args=(path, recorder, stop),
                               daemon=True)
    watcher.start()
    try:
        # The watcher arms in its own time, unseen: write the edit again until it is read.
        def written_and_read() -> bool:
            path.write_text(VALID)
            return recorder.changed.wait(1.0)

        wait_for(written_and_read, "the valid edit to be applied", 30, 0)
        assert recorder.names()[-1] == ["a", "b"]
        path.write_text("resources:\n  - {name: no-type}\n")
        wait_for(refused.is_set, "the invalid edit to be read and refused", 30, 0.02)
        assert all(names == ["a", "b"] for names in recorder.names()), (
            "an invalid edit must keep the old graph")
        path.write_text("resources: []\n")
        wait_for(lambda: recorder.names()[-1] == [], "the edit after it to be applied", 30, 0.02)
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
