"""``fluence status`` as a user reads it: what every bound pod requests, by kube-scheduler's rule
(issue 27: a node holding 12 of its 4 cpu was shown "fluence 0, free 4")."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from fluence_core.cli import app, load_plugin_commands
from fluence_core.cli import status as status_command
from fluence_core.kube.api import NODES, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.testing import make_node_dict, make_pod_dict

pytestmark = pytest.mark.usefixtures("clean_env")


def _pod_level(name: str, cpu: str, node: str, scheduler: str) -> dict[str, Any]:
    """A bound pod sized at pod level only (its container asks nothing)."""
    body = make_pod_dict(name, "0", scheduler=scheduler, node_name=node)
    body["spec"]["containers"][0]["resources"] = {}
    body["spec"]["resources"] = {"requests": {"cpu": cpu}}
    return body


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
        cluster.create(PODS, _pod_level(f"ours-{i}", "4", "n0", "fluence"), "default")
    cluster.create(PODS, _pod_level("theirs", "3", "n1", "default-scheduler"), "default")
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
