"""``fluence up``'s resources-file watch: valid edits apply live, invalid ones are ignored."""

from __future__ import annotations

import itertools
import os
import shutil
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


def _configmap_update(folder: Path, content: str, serial: int) -> None:
    """What the kubelet's atomic writer does to a ConfigMap volume on each edit: the files in
    a new timestamped folder, the ``..data`` link swapped to it, the old folder removed."""
    fresh = folder / f"..2026_12_01_{serial:02d}"
    fresh.mkdir()
    (fresh / "resources.yaml").write_text(content)
    data = folder / "..data"
    old = os.readlink(data) if data.is_symlink() else None
    swap = folder / "..data_tmp"
    swap.symlink_to(fresh.name)
    os.rename(swap, data)
    if old is not None:
        shutil.rmtree(folder / old)


def _listing(*names: str) -> str:
    return "resources:\n" + "".join(f"  - {{type: qpu, name: {n}}}\n" for n in names)


def test_every_edit_of_a_configmap_volume_is_applied_not_only_the_first(tmp_path: Path) -> None:
    serials = itertools.count()
    _configmap_update(tmp_path, _listing("a"), next(serials))
    path = tmp_path / "resources.yaml"
    path.symlink_to("..data/resources.yaml")  # as the kubelet mounts it
    recorder = Recorder()
    stop = threading.Event()
    watcher = threading.Thread(target=up.watch_resources, args=(path, recorder, stop),
                               daemon=True)
    watcher.start()
    try:
        def edited_and_read() -> bool:  # the watcher arms unseen: edit again until it reads
            _configmap_update(tmp_path, _listing("a", "b"), next(serials))
            return recorder.changed.wait(1.0)

        wait_for(edited_and_read, "the first edit to be applied", 30, 0)
        assert recorder.names()[-1] == ["a", "b"]
        for edit in (["c"], ["d", "e"]):
            _configmap_update(tmp_path, _listing(*edit), next(serials))
            wait_for(lambda: recorder.names()[-1] == edit, f"the edit {edit} to be applied",
                     30, 0.02)
    finally:
        stop.set()
        watcher.join(timeout=10)
