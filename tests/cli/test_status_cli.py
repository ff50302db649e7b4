"""``fluence status`` as a user reads it: what every bound pod requests, by kube-scheduler's rule
(issue 27: a node holding 12 of its 4 cpu was shown "fluence 0, free 4")."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fluence_core.cli import app, load_plugin_commands
from fluence_core.cli import status as status_command
from fluence_core import names
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.testing import make_node_dict, make_pod_dict, make_pod_group_dict

pytestmark = pytest.mark.usefixtures("clean_env")


def _rows(output: str) -> dict[str, list[str]]:
    """The Nodes table's cells by node name."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0].startswith("n"):
            rows[cells[0]] = cells
    return rows


def test_status_shows_pod_level_requests_of_every_scheduler_and_flags_overcommit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster()
    for name in ("n0", "n1"):
        cluster.create(NODES, make_node_dict(name, 4, "16Gi", pods=None))
    for i in range(3):  # 12 of 4 cpu on n0, Fluence's pods, sized at pod level
        ours = make_pod_dict(f"ours-{i}", None, node_name="n0", pod_requests={"cpu": "4"})
        cluster.create(PODS, ours, "default")
    theirs = make_pod_dict("theirs", None, scheduler="default-scheduler", node_name="n1",
                           pod_requests={"cpu": "3"})
    cluster.create(PODS, theirs, "default")
    monkeypatch.setattr(status_command, "connect", lambda settings: cluster)
    load_plugin_commands(app)
    result = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    # node, cpu, fluence, others, free, memory used, gpus used, state
    assert rows["n0"][:5] == ["n0", "4", "12", "0", "-8"]
    assert "OVERCOMMITTED cpu" in rows["n0"][7]
    assert rows["n1"][:5] == ["n1", "4", "0", "3", "1"]
    assert "OVERCOMMITTED" not in rows["n1"][7]


def test_status_lists_the_room_reserved_for_a_waiting_gang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster()
    for name in ("n0", "n1"):
        cluster.create(NODES, make_node_dict(name, 4, "16Gi", pods=None))
    record = {"start": "2026-12-02T08:00:00Z",
              "nodes": {"n0": {"cores": 4, "gpus": 0, "memory_chunks": 0},
                        "n1": {"cores": 2, "gpus": 0, "memory_chunks": 0}}}
    group = make_pod_group_dict("big", 2, "default")
    group["metadata"]["annotations"] = {names.RESERVATION_ANNOTATION: json.dumps(record)}
    cluster.create(PODGROUPS, group, "default")
    for i in range(2):
        cluster.create(PODS, make_pod_dict(f"big-{i}", "4", group="big"), "default")
    monkeypatch.setattr(status_command, "connect", lambda settings: cluster)
    load_plugin_commands(app)
    result = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Reservations" in result.stdout
    row = next(line for line in result.stdout.splitlines()
               if "default/big" in line and "n0: 4" in line)
    assert "n1: 2" in row and "2026-12-02T08:00:00Z" in row
