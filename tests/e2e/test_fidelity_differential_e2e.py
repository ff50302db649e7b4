"""Fluence against kube-scheduler v1.36 on the same objects: bind or not, and where.

Each generated case (:mod:`fidelity_cases`) is created on a real API server with
kube-scheduler running beside it. The pod is placed once by kube-scheduler
(``schedulerName: default-scheduler``) and once by Fluence (``fluence``), each
copy deleted before the next. Both must agree on bind versus no-bind. Where both
bind, Fluence's node must be one kube-scheduler's filters accept: a probe copy,
pinned to that node by required node affinity (``metadata.name``), must bind
under kube-scheduler. The agreement table is printed (``-s`` shows it).

Fixed cases for a pod's size (:func:`fidelity_cases.sizing_cases`: sidecars, init
containers, pod-level requests, overhead) are compared the same way, each also
checked against the answer kube-scheduler must give, and node by node through the
feasibility filters (NodeResourcesFit counting CPU and memory, as kube-scheduler's).

Skipped without ``KUBEBUILDER_ASSETS`` or without kube-scheduler (beside the API
server, or ``KUBE_SCHEDULER``).
"""

from __future__ import annotations

import copy
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from fluence_core.kube.api import Resource
from fluence_core.feasibility import PodFacts, Snapshot, feasible
from fluence_core.kube.client import KubeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from tests.e2e.peer import with_kube_scheduler
from fluence_core.testing_apiserver import (
    ApiServer, ensure_namespace,
)
from tests.e2e.fidelity_cases import OVERHEAD, OVERHEAD_CLASS, Case, generate, sizing_cases

pytestmark = pytest.mark.e2e

CASES = int(os.environ.get("FLUENCE_DIFF_CASES", "200"))
"""At least 200 by default; fewer for a quick look."""
NAMESPACE = "fidelity"
MATCHER = "fluxion" if os.environ.get("FLUENCE_FLUXION_LIB") else "embedded"
"""The matcher Fluence must place with: Fluxion when its library is named, as ``fluence up``
chooses (a library that fails to load must fail the run, not hand it to the embedded one)."""


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """An API server of this module's own (nodes are cluster-wide) with kube-scheduler."""
    yield from with_kube_scheduler(tmp_path_factory, "fidelity")


def _wait_kube(kube: KubeCluster, name: str, timeout: float = 20.0) -> tuple[str | None, str]:
    """Where kube-scheduler bound the pod, or None and its message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = kube.get("pods", name, NAMESPACE)
        assert pod is not None
        if pod["spec"].get("nodeName"):
            return pod["spec"]["nodeName"], ""
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return None, str(condition.get("message"))
        time.sleep(0.05)
    raise AssertionError(f"kube-scheduler said nothing about {name} in {timeout} s")


def _place_with_kube(kube: KubeCluster, pod: dict[str, Any], name: str) -> tuple[str | None, str]:
    body = copy.deepcopy(pod)
    body["metadata"]["name"] = name
    body["spec"]["schedulerName"] = "default-scheduler"
    kube.create("pods", body, NAMESPACE)
    try:
        return _wait_kube(kube, name)
    finally:
        kube.delete("pods", name, NAMESPACE, grace_period_seconds=0)


def _place_with_fluence(
    kube: KubeCluster, pod: dict[str, Any], name: str
) -> tuple[str | None, str]:
    body = copy.deepcopy(pod)
    body["metadata"]["name"] = name
    body["spec"]["schedulerName"] = "fluence"
    kube.create("pods", body, NAMESPACE)
    try:
        scheduler = Scheduler(kube, load_settings())
        scheduler.start()
        assert scheduler.matcher.name == MATCHER, f"{scheduler.matcher.name} placed {name}"
        results = scheduler.schedule_once()
        placed = {r.group: r for r in results}.get(f"{NAMESPACE}/{name}")
        assert placed is not None, f"fluence did not try {name}: {results}"
        node = placed.placed.get(f"{NAMESPACE}/{name}")
        return node, placed.reason or ""
    finally:
        kube.delete("pods", name, NAMESPACE, grace_period_seconds=0)


def _pinned(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod, also required to go to ``node`` (ANDed into every node selector term)."""
    body = copy.deepcopy(pod)
    field = {"key": "metadata.name", "operator": "In", "values": [node]}
    affinity = body["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution",
                                   {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term.setdefault("matchFields", []).append(field)
    return body


def _set_up(kube: KubeCluster, case: Case) -> None:
    for node in case.nodes:
        kube.create("nodes", node)
    for pod in case.existing:
        kube.create("pods", pod, NAMESPACE)


def _tear_down(kube: KubeCluster, case: Case) -> None:
    for pod in case.existing:
        kube.delete("pods", pod["metadata"]["name"], NAMESPACE, grace_period_seconds=0)
    for node in case.nodes:
        kube.delete("nodes", node["metadata"]["name"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (kube.list("nodes").items or
                                           kube.list("pods", NAMESPACE).items):
        time.sleep(0.05)
    time.sleep(0.2)  # kube-scheduler's cache hears of the deletions by watch


def _compare(kube: KubeCluster, case: Case) -> tuple[str, str | None]:
    """Place ``case``'s pod with each scheduler: the verdict, and what disagrees (or None)."""
    _set_up(kube, case)
    time.sleep(0.2)  # both schedulers' views include the new nodes and pods
    try:
        kube_node, kube_why = _place_with_kube(kube, case.pod, f"c{case.index}-k")
        fluence_node, fluence_why = _place_with_fluence(kube, case.pod, f"c{case.index}-f")
        verdict = f"kube {'binds' if kube_node else 'refuses'}, " \
                  f"fluence {'binds' if fluence_node else 'refuses'}"
        if kube_node and fluence_node:
            accepted, _ = _place_with_kube(kube, _pinned(case.pod, fluence_node),
                                           f"c{case.index}-probe")
            verdict += ", on a node kube accepts" if accepted else ", ON A NODE KUBE REFUSES"
        problem = None
        if (kube_node is None) != (fluence_node is None) or "REFUSES" in verdict:
            problem = "disagree"
        elif case.kube_binds is not None and case.kube_binds != (kube_node is not None):
            expected = "bind" if case.kube_binds else "refuse"
            problem = f"the case expects kube-scheduler to {expected}"
        if problem is None:
            return verdict, None
        return verdict, (f"case {case.index} ({', '.join(sorted(case.features))}): {problem}: "
                         f"{verdict}; kube: {kube_node or kube_why}; "
                         f"fluence: {fluence_node or fluence_why}")
    finally:
        _tear_down(kube, case)


def test_fluence_agrees_with_kube_scheduler_on_generated_cases(control_plane: ApiServer) -> None:
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    table: Counter[str] = Counter()
    by_feature: Counter[str] = Counter()
    disagreements = []
    for case in generate(CASES):
        verdict, problem = _compare(kube, case)
        table[verdict] += 1
        for feature in case.features:
            by_feature[feature] += 1
        if problem:
            disagreements.append(problem)
    print(f"\nagreement over {CASES} cases (kube-scheduler v1.36 vs fluence, {MATCHER}):")
    for verdict, count in sorted(table.items()):
        print(f"  {count:4d}  {verdict}")
    print("features exercised: " + ", ".join(f"{f}={n}" for f, n in sorted(by_feature.items())))
    for line in disagreements:
        print("  DISAGREE " + line)
    assert not disagreements, "\n".join(disagreements)


RUNTIME_CLASSES = Resource("runtimeclasses", "RuntimeClass", group="node.k8s.io",
                           namespaced=False)


def _ensure_overhead_class(kube: KubeCluster) -> None:
    """The RuntimeClass whose ``overhead.podFixed`` the API server copies into the pods
    naming it (``spec.overhead``), as a sandboxed runtime's would be."""
    if kube.get(RUNTIME_CLASSES, OVERHEAD_CLASS) is None:
        kube.create(RUNTIME_CLASSES, {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": OVERHEAD_CLASS}, "handler": "runc",
            "overhead": {"podFixed": OVERHEAD}})


def test_fluence_sizes_pods_as_kube_scheduler_does_case_by_case(
        control_plane: ApiServer) -> None:
    """Sidecars before and after a large init container, pod-level requests with and
    without container requests, a RuntimeClass's overhead, and pods of other schedulers
    sized those ways: bind or not agrees case by case, and kube-scheduler answers as
    each case was built to make it answer."""
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    _ensure_overhead_class(kube)
    problems = []
    print(f"\nsizing cases (kube-scheduler v1.36 vs fluence, {MATCHER}):")
    for case in sizing_cases():
        verdict, problem = _compare(kube, case)
        print(f"  case {case.index} {', '.join(sorted(case.features)):40s} {verdict}")
        if problem:
            problems.append(problem)
    for line in problems:
        print("  DISAGREE " + line)
    assert not problems, "\n".join(problems)


def test_feasible_node_sets_equal_kube_schedulers_filters(control_plane: ApiServer) -> None:
    """Per node: Fluence's feasibility module versus kube-scheduler given only that node.

    kube-scheduler's answer for a node is whether a copy pinned there (``metadata.name``
    ANDed into its node affinity) binds. Pinning narrows the domains a hard topology
    spread constraint counts (node affinity is honoured), so cases with one are left
    out of this comparison and counted.
    """
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    compared = skipped = nodes_compared = 0
    disagreements = []
    for case in generate(CASES, seed=34):
        hard_spread = any(c.get("whenUnsatisfiable") == "DoNotSchedule"
                          for c in case.pod["spec"].get("topologySpreadConstraints") or ())
        if hard_spread:
            skipped += 1
            continue
        _set_up(kube, case)
        time.sleep(0.2)
        try:
            snapshot = Snapshot.from_kube(kube.list("nodes").items,
                                          kube.list("pods", NAMESPACE).items,
                                          namespaces=kube.list("namespaces").items)
            probe = copy.deepcopy(case.pod)
            probe["metadata"]["namespace"] = NAMESPACE
            ours = set(feasible(PodFacts.from_kube(probe), snapshot).nodes)
            theirs = set()
            for node in case.nodes:
                name = node["metadata"]["name"]
                bound, _ = _place_with_kube(kube, _pinned(case.pod, name), f"c{case.index}-{name}")
                if bound:
                    theirs.add(name)
            compared += 1
            nodes_compared += len(case.nodes)
            if ours != theirs:
                disagreements.append(f"case {case.index} ({', '.join(sorted(case.features))}): "
                                     f"fluence {sorted(ours)}, kube-scheduler {sorted(theirs)}")
        finally:
            _tear_down(kube, case)
    print(f"\nfeasible sets: {compared} cases ({nodes_compared} nodes) compared, "
          f"{len(disagreements)} differ; {skipped} with a hard spread constraint left out")
    for line in disagreements:
        print("  DISAGREE " + line)
    assert not disagreements, "\n".join(disagreements)


def test_feasible_node_sets_size_pods_as_kube_scheduler_does(control_plane: ApiServer) -> None:
    """Per node, for the sizing cases: NodeResourcesFit (CPU and memory included, as in
    kube-scheduler's own filters) versus kube-scheduler given only that node. Fluence
    reads the pod as the API server stored it (its RuntimeClass's overhead filled in),
    from a copy no scheduler serves."""
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    _ensure_overhead_class(kube)
    disagreements = []
    for case in sizing_cases():
        _set_up(kube, case)
        stored = copy.deepcopy(case.pod)
        stored["metadata"]["name"] = f"c{case.index}-stored"
        stored["spec"]["schedulerName"] = "nobody"
        stored = kube.create("pods", stored, NAMESPACE)
        time.sleep(0.2)
        try:
            snapshot = Snapshot.from_kube(kube.list("nodes").items,
                                          kube.list("pods", NAMESPACE).items,
                                          namespaces=kube.list("namespaces").items)
            ours = set(feasible(PodFacts.from_kube(stored), snapshot).nodes)
            theirs = set()
            for node in case.nodes:
                name = node["metadata"]["name"]
                bound, _ = _place_with_kube(kube, _pinned(case.pod, name), f"c{case.index}-{name}")
                if bound:
                    theirs.add(name)
            if ours != theirs:
                disagreements.append(f"case {case.index} ({', '.join(sorted(case.features))}): "
                                     f"fluence {sorted(ours)}, kube-scheduler {sorted(theirs)}")
        finally:
            kube.delete("pods", f"c{case.index}-stored", NAMESPACE, grace_period_seconds=0)
            _tear_down(kube, case)
    for line in disagreements:
        print("  DISAGREE " + line)
    assert not disagreements, "\n".join(disagreements)
