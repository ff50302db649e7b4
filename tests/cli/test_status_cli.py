"""``fluence status`` as a user reads it: what every bound pod requests, by kube-scheduler's rule
(issue 27: a node holding 12 of its 4 cpu was shown "fluence 0, free 4")."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fluence_core.cli import app, load_plugin_commands
from fluence_core.cli import status as status_command
from fluence_core.kube.api import NODES, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.testing import make_node_dict, make_pod_dict

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
