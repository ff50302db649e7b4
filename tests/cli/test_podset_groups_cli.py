"""``fluence status`` lists the gangs of each group of PodSets, and ``fluence plan`` names
the group a file's pods state."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from fluence_core import names
from fluence_core.cli import app, load_plugin_commands
from fluence_core.cli import status as status_command
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.testing import make_node_dict, make_pod_dict, make_pod_group_dict
from tests.test_cli import fluence, ok

pytestmark = pytest.mark.usefixtures("clean_env")
STATED = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
          names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"}


def test_status_lists_the_pending_gangs_of_a_group_of_podsets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster()
    cluster.create(NODES, make_node_dict("n0", 4, "16Gi", labels={names.RACK_LABEL: "r0"}))
    for name, size in (("leader", 1), ("workers", 2)):
        cluster.create(PODGROUPS, make_pod_group_dict(name, size, annotations={
            **STATED, names.PODSET_GROUP_WORKLOAD_ANNOTATION: "JobSet/js"}), "default")
        cluster.create(PODS, make_pod_dict(f"{name}-0", "1", annotations=STATED,
                                           group=name), "default")
    monkeypatch.setattr(status_command, "connect", lambda settings: cluster)
    load_plugin_commands(app)
    result = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Groups of PodSets" in result.stdout
    rows = [line for line in result.stdout.splitlines()
            if "group of PodSets lw of default/JobSet/js" in line]
    assert len(rows) == 2 and all("pending" in row for row in rows), rows
    assert any("default/leader" in row for row in rows)


def test_plan_names_the_group_of_podsets_the_pods_state(
        write_yaml: Callable[..., Path]) -> None:
    nodes = write_yaml("nodes.yaml", *(make_node_dict(
        f"n{i}", 4, "16Gi", labels={names.RACK_LABEL: "r0"}) for i in range(2)))
    pods = write_yaml("pods.yaml", *(make_pod_dict(f"p{i}", "1", annotations=STATED)
                                     for i in range(2)))
    resources = write_yaml("resources.yaml",
                           text=f"topology:\n  levels: [{names.RACK_LABEL}]\n")
    output = ok(fluence("plan", str(pods), "--nodes", nodes, "--resources", resources))
    assert "group of PodSets lw" in output
