"""Hostile node files (``fluence graph --nodes``): a clear error naming the node, never a traceback.

The same reader (``NodeInfo.from_kube``) serves the scheduler's node watch, so a
case here is also a Node object the API server could hand the scheduler.
"""

from __future__ import annotations

from pathlib import Path

import re

import pytest

from tests.hostile.cases import ALIAS_BOMB, Case, cases, run_fluence

pytestmark = pytest.mark.usefixtures("clean_env")


def node(allocatable: str = "{cpu: '4', memory: 16Gi}", name: str = "n0", extra: str = "") -> str:
    return (
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n"
        f"status: {{allocatable: {allocatable}}}\n{extra}"
    )


CASES = [
    Case("cpu-negative", node("{cpu: '-4'}"), "node n0: quantity '-4' is negative"),
    Case("cpu-1e5000", node("{cpu: '1e5000'}"), "node n0: quantity '1e5000' is too large"),
    Case("cpu-1e18", node("{cpu: '1e18'}"), "node n0: quantity '1e18' is too large"),
    Case(
        "cpu-1e10000000", node("{cpu: '1e10000000'}"), "node n0: quantity '1e10000000' is too large"
    ),
    Case("cpu-past-node-limit", node("{cpu: '100000'}"), "node n0: cpu 100000 is more than"),
    Case("cpu-text", node("{cpu: lots}"), "node n0: not a Kubernetes quantity: 'lots'"),
    Case("cpu-arabic-digits", node("{cpu: '\u0663'}"), "node n0: not a Kubernetes quantity"),
    Case("cpu-underscore", node("{cpu: '4_000'}"), "node n0: not a Kubernetes quantity: '4_000'"),
    Case("cpu-sexagesimal", node("{cpu: 1:30}"), "node n0: not a Kubernetes quantity: '1:30'"),
    Case("cpu-bool", node("{cpu: true}"), "node n0: not a quantity: True"),
    Case("cpu-list", node("{cpu: [4]}"), r"node n0: not a quantity: \[4\]"),
    Case("cpu-inf", node("{cpu: .inf}"), "node n0: not a finite quantity"),
    Case("cpu-long-text", node("{cpu: '" + "1" * 80 + "'}"), "longer than 64 characters"),
    Case(
        "memory-negative", node("{cpu: '4', memory: -1Gi}"), "node n0: quantity '-1Gi' is negative"
    ),
    Case(
        "memory-exabytes", node("{cpu: '4', memory: 9Ei}"), "node n0: quantity '9Ei' is too large"
    ),
    Case(
        "memory-bad-suffix", node("{cpu: '4', memory: 4Gb}"), "node n0: not a Kubernetes quantity"
    ),
    Case(
        "gpus-past-limit",
        node("{cpu: '4', nvidia.com/gpu: '5000'}"),
        "node n0: nvidia.com/gpu 5000 is more than",
    ),
    Case("pods-negative", node("{cpu: '4', pods: '-110'}"), "node n0: quantity '-110' is negative"),
    Case(
        "no-name",
        "kind: Node\nmetadata: {}\nstatus: {allocatable: {cpu: '4'}}\n",
        "a Node without metadata.name",
    ),
    Case(
        "name-a-number",
        "kind: Node\nmetadata: {name: 7}\nstatus: {allocatable: {cpu: '4'}}\n",
        "metadata.name must be a string",
    ),
    Case("metadata-a-list", "kind: Node\nmetadata: [n0]\n", "Node metadata is not a mapping"),
    Case(
        "status-a-string",
        "kind: Node\nmetadata: {name: n0}\nstatus: ready\n",
        "node n0: status is not a mapping",
    ),
    Case("allocatable-a-list", node("[cpu, 4]"), "node n0: status.allocatable is not a mapping"),
    Case(
        "labels-a-list",
        node(extra="").replace("{name: n0}", "{name: n0, labels: [a]}"),
        "node n0: metadata.labels is not a mapping",
    ),
    Case(
        "taints-a-mapping",
        node(extra="spec: {taints: {key: a}}\n"),
        "node n0: spec.taints is not a list",
    ),
    Case(
        "taint-a-string",
        node(extra="spec: {taints: [NoSchedule]}\n"),
        "node n0: spec.taints has an entry that is not a mapping",
    ),
    Case("duplicate-key", node("{cpu: '4', cpu: '8'}"), "key 'cpu' appears twice"),
    Case("duplicate-node", node() + "---\n" + node(), "node n0 is already in the graph"),
    Case("not-yaml", "kind: Node\nmetadata: {name: [\n", "not valid YAML"),
    Case(
        "alias-bomb",
        ALIAS_BOMB,
        "expands to more than",
    ),
]


@pytest.mark.parametrize("case", cases(CASES))
def test_a_hostile_node_file_is_refused_naming_the_node(case: Case, tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(case.input)
    code, output, exception = run_fluence("graph", "--nodes", str(path))
    assert code == 2, output
    assert "Traceback" not in output
    assert exception is None or isinstance(exception, SystemExit)
    assert re.search(case.expect, output), output


def test_a_node_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_bytes(node().encode() + b"# \xff\n")
    code, output, _ = run_fluence("graph", "--nodes", str(path))
    assert code == 2
    assert "not UTF-8" in output
