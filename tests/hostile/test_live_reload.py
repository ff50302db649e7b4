"""Hostile live edits of resources.yaml under a running scheduler.

Each bad edit is logged and ignored: the old graph, its held allocations and its
pinned foreign pods stay whole, a finished pod's cores are still freed, and the
next valid edit is applied (the reload is transactional).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from fluence_core.cli.up import apply_resources
from fluence_core.kube.api import NODES, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.resource_config import parse_resource_config
from tests.hostile.cases import ALIAS_BOMB, Case, cases
from tests.scheduler.conftest import Harness, node, pod

pytestmark = pytest.mark.usefixtures("clean_env")

QPU = "fluxion.flux-framework.org/qpu"
GOOD = "resources:\n  - type: qpu\n    name: cepheus\n    count: 2\n"

CASES = [
    Case(
        "parent-not-a-node",
        "resources: [{type: qpu, name: cepheus, count: 2, parent: n9}]\n",
        "unknown parent 'n9'",
    ),
    Case("held-type-removed", "resources: [{type: licence}]\n", "cannot hold what is held now"),
    Case(
        "held-count-shrunk",
        "resources: [{type: qpu, name: cepheus, count: 1}]\n  # two are held\n",
        "cannot hold what is held now",
    ),
    Case(
        "held-backend-renamed",
        "resources: [{type: qpu, name: ankaa, count: 2}]\n",
        "cannot hold what is held now",
    ),
    Case("not-yaml", "resources: [\n", "not valid YAML"),
    Case("deep-nesting", "resources: " + "[" * 500 + "]" * 500 + "\n", "nested deeper"),
    Case(
        "alias-bomb",
        ALIAS_BOMB
        + "resources: []\n",
        "expands to more than",
    ),
    Case(
        "duplicate-names",
        "resources: [{type: qpu, name: c}, {type: qpu, name: c}]\n",
        "already used",
    ),
    Case("type-dotdot", "resources: [{type: ..}]\n", "must be at most 63"),
    Case("count-huge", "resources: [{type: qpu, count: 1000000000}]\n", "count must be an integer"),
    Case("yaml11-bool-count", "resources: [{type: qpu, count: yes}]\n", "got 'yes'"),
    Case("top-level-list", "- type: qpu\n", "expected a mapping"),
    Case("unknown-key", "resources: [{type: qpu, cuont: 2}]\n", r"unknown keys \['cuont'\]"),
    Case(
        "env-collision", "resources: [{type: qpu, attributes: {x-y: 1, X_Y: 2}}]\n", "FLUXION_X_Y"
    ),
]
BYTES = [
    Case("invalid-utf8", b"resources: [{type: q\xff}]\n", "not UTF-8"),
    Case("nul-bytes", b"\x00\x00\x00", "not valid YAML"),
]


class Running:
    """A started scheduler holding both qpus, with a foreign pod pinned on n0."""

    def __init__(self, path: Path) -> None:
        path.write_text(GOOD)
        self.path = path
        cluster = FakeCluster()
        self.h = Harness(cluster, parse_resource_config(GOOD, str(path)))
        self.h.add(
            node("n0", cpu=4),
            node("n1", cpu=4),
            pod("q1", requests={QPU: "1"}),
            pod("q2", requests={QPU: "1"}),
            pod("theirs", "2", scheduler="default-scheduler", node_name="n0"),
        )
        self.h.cycle()
        assert self.h.node_of("q1") and self.h.node_of("q2")

    def state(self) -> Any:
        s = self.h.scheduler
        return s.graph, dict(s.matcher.allocations()), dict(s.view.pins)


@pytest.mark.parametrize("case", cases(CASES + BYTES))
def test_a_hostile_live_edit_is_logged_and_the_old_state_stays_whole(
    case: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    running = Running(tmp_path / "resources.yaml")
    before = running.state()
    if isinstance(case.input, bytes):
        running.path.write_bytes(case.input)
    else:
        running.path.write_text(case.input)
    with caplog.at_level(logging.ERROR, logger="fluence"):
        assert apply_resources(running.path, running.h.scheduler) is False
    messages = [r.getMessage() for r in caplog.records]
    assert any("keeping the old graph" in m and re.search(case.expect, m) for m in messages), (
        messages
    )
    assert running.state() == before, "graph, allocations and pins are untouched"
    # The loop goes on: a finished pod frees its cores, new pods are placed.
    running.h.finish("q1")
    running.h.add(pod("big", "4"))
    running.h.cycle()
    assert running.h.node_of("big") is not None
    # And the next valid edit applies.
    running.path.write_text(GOOD.replace("count: 2", "count: 3"))
    assert apply_resources(running.path, running.h.scheduler) is True
    running.h.add(pod("q3", requests={QPU: "1"}))
    running.h.cycle()
    assert running.h.node_of("q3") is not None


def test_a_vanished_file_is_logged_and_the_old_state_stays_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    running = Running(tmp_path / "resources.yaml")
    before = running.state()
    running.path.unlink()
    with caplog.at_level(logging.ERROR, logger="fluence"):
        assert apply_resources(running.path, running.h.scheduler) is False
    assert any("cannot read" in r.getMessage() for r in caplog.records)
    assert running.state() == before


def test_nodes_are_not_touched_by_a_refused_edit(tmp_path: Path) -> None:
    running = Running(tmp_path / "resources.yaml")
    running.path.write_text(CASES[0].input)
    apply_resources(running.path, running.h.scheduler)
    assert sorted(n.name for n in running.h.scheduler.graph.nodes) == ["n0", "n1"]
    assert running.h.cluster.get(NODES, "n0") is not None
    assert running.h.cluster.get(PODS, "theirs", "default")["spec"]["nodeName"] == "n0"
