"""``fluence graph`` and ``fluence status`` list DRA devices, free and allocated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from fluence_core.cli import app, load_plugin_commands
from fluence_core.cli import status as status_command
from fluence_core.kube.api import NODES, RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.kube.fake import FakeCluster
from fluence_core.testing import (
    make_device, make_device_request, make_node_dict, make_resource_claim_dict,
    make_resource_slice_dict,
)
from tests.test_cli import fluence, ok

pytestmark = pytest.mark.usefixtures("clean_env")
DRIVER = "gpu.example.com"


def _slice() -> dict[str, object]:
    return make_resource_slice_dict("n0-gpus", DRIVER,
                                    [make_device(f"gpu{i}", {"model": "a100"}) for i in range(2)],
                                    node="n0")


def test_graph_lists_the_devices_of_the_slices_beside_the_nodes(
        write_yaml: Callable[..., Path]) -> None:
    nodes = write_yaml("nodes.yaml", make_node_dict("n0", 4, "16Gi"), _slice())
    output = ok(fluence("graph", "--nodes", nodes))
    assert "Device vertices (DRA ResourceSlices)" in output
    assert "gpu.example.com/n0/gpu1" in output and "model=a100" in output
    assert "/cluster0/n0" in output  # the vertex hangs under its node
    assert "devices=2" in output


def test_graph_jgf_holds_a_device_vertex_under_its_node(
        write_yaml: Callable[..., Path]) -> None:
    nodes = write_yaml("nodes.yaml", make_node_dict("n0", 4, "16Gi"), _slice())
    jgf = json.loads(ok(fluence("graph", "--nodes", nodes, "--jgf")))
    devices = [v["metadata"] for v in jgf["graph"]["nodes"]
               if v["metadata"]["type"] == "device"]
    assert [d["paths"]["containment"] for d in devices] == [
        "/cluster0/n0/gpu.example.com:n0:gpu0", "/cluster0/n0/gpu.example.com:n0:gpu1"]
    assert "dra.gpu.example.com/model=a100" in devices[0]["properties"]


def test_status_shows_which_claim_holds_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster()
    cluster.create(NODES, make_node_dict("n0", 4, "16Gi"))
    cluster.create(RESOURCE_SLICES, _slice())
    cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
        "held", [make_device_request("r", "gpu")]))
    cluster.patch_status(RESOURCE_CLAIMS, "held", {"status": {"allocation": {"devices": {
        "results": [{"request": "r", "driver": DRIVER, "pool": "n0", "device": "gpu0"}]}}}},
        "default")
    monkeypatch.setattr(status_command, "connect", lambda settings: cluster)
    load_plugin_commands(app)
    result = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[2].strip(): line.split("│")[4].strip()
            for line in result.stdout.splitlines() if "gpu.example.com/n0/" in line}
    assert rows == {"gpu.example.com/n0/gpu0": "claim default/held",
                    "gpu.example.com/n0/gpu1": "free"}
