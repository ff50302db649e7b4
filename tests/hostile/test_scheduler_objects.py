"""Hostile objects in the cluster: one pod, node or PodGroup never stops the scheduler.

Each case adds one object to a cluster where ordinary pods keep arriving. The
ordinary pods are placed before and after a restart (which re-lists the hostile
object), and what is wrong is named: in the pod's FailedScheduling event when the
object is a pending pod, in the log otherwise.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from tests.hostile.cases import Case, cases
from tests.scheduler.conftest import Harness, node, pod

pytestmark = pytest.mark.usefixtures("clean_env")


def shaped(name: str, **spec: Any) -> dict[str, Any]:
    body = pod(name)
    body["spec"].update(spec)
    return body


PENDING = [  # pending pods of ours: refused with an event on the pod
    Case(
        "cpu-1e5000",
        pod("h", "1e5000"),
        r"pod default/h: spec\.containers\[0\]\.resources\.requests\.cpu: quantity '1e5000'"
        r" is too large",
    ),
    Case("cpu-1e18", pod("h", "1e18"), "quantity '1e18' is too large"),
    Case("cpu-1e10000000", pod("h", "1e10000000"), "quantity '1e10000000' is too large"),
    Case("cpu-negative", pod("h", "-2"), "quantity '-2' is negative"),
    Case("cpu-text", pod("h", "lots"), "not a Kubernetes quantity: 'lots'"),
    Case("memory-9Ei", pod("h", requests={"memory": "9Ei"}), "memory: quantity '9Ei' is too large"),
    Case(
        "many-containers-overflow",
        shaped(
            "h",
            containers=[
                {"name": f"c{i}", "resources": {"requests": {"cpu": "9000000000000000"}}}
                for i in range(3)
            ],
        ),
        "cpu requests add up to more than int64 milli-units",
    ),
    Case("containers-a-string", shaped("h", containers="app"), "spec.containers is not a list"),
    Case("container-a-number", shaped("h", containers=[7]),
         r"spec\.containers\[0\] is not an object"),
    Case(
        "requests-a-list",
        shaped("h", containers=[{"name": "a", "resources": {"requests": [1]}}]),
        "resources.requests is not an object",
    ),
    Case(
        "init-containers-a-mapping",
        shaped("h", initContainers={"a": 1}),
        "spec.initContainers is not a list",
    ),
    Case(
        "node-selector-a-list",
        shaped("h", nodeSelector=["a"]),
        "spec.nodeSelector is not a mapping",
    ),
    Case("pod-level-a-list", shaped("h", resources=["cpu"]), "spec.resources is not an object"),
    Case(
        "pod-level-cpu-text",
        shaped("h", resources={"requests": {"cpu": "lots"}}),
        r"spec\.resources\.requests\.cpu: not a Kubernetes quantity: 'lots'",
    ),
    Case("overhead-a-string", shaped("h", overhead="500m"), "spec.overhead is not an object"),
    Case(
        "sidecar-memory-9Ei",
        shaped("h", initContainers=[{"name": "s", "restartPolicy": "Always",
                                     "resources": {"requests": {"memory": "9Ei"}}}]),
        r"spec\.initContainers\[0\]\.resources\.requests\.memory: quantity '9Ei' is too large",
    ),
]

LOGGED = [  # other objects: logged with the object named, the rest goes on
    Case("node-cpu-1e18", node("bad", cpu="1e18"), "node bad: quantity '1e18' is too large"),
    Case("node-cpu-negative", node("bad", cpu="-4"), "node bad: quantity '-4' is negative"),
    Case("node-cpu-past-limit", node("bad", cpu="100000"), "node bad: cpu 100000 is more than"),
    Case("node-memory-text", node("bad", memory="lots"), "node bad: not a Kubernetes quantity"),
    Case(
        "node-taints-a-mapping",
        node("bad", spec={"taints": {"a": 1}}),
        "node bad: spec.taints is not a list",
    ),
    Case(
        "foreign-bound-1e18",
        pod("h", "1e18", scheduler="default-scheduler", node_name="n0"),
        "pod default/h on n0 is not subtracted from its node: .*too large",
    ),
    Case(
        "foreign-bound-garbled",
        shaped("h", schedulerName="default-scheduler", nodeName="n0", containers="x"),
        "pod default/h on n0 is not subtracted",
    ),
]


def _add(cluster: FakeCluster, obj: dict[str, Any]) -> None:
    resource = {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS}[obj["kind"]]
    cluster.create(resource, obj, obj["metadata"].get("namespace"))


def _ordinary_pods_keep_being_placed(h: Harness) -> None:
    for step in range(2):
        h.add(pod(f"ok{step}", "1"))
        h.cycle()
        assert h.node_of(f"ok{step}") == "n0", f"ordinary pod {step} was placed"
        h.finish(f"ok{step}")
        h.cycle()
        if step == 0:
            h.restart()  # re-lists the hostile object: no crash loop


@pytest.mark.parametrize("case", cases(PENDING))
def test_a_hostile_pending_pod_waits_with_a_reason_and_the_rest_is_placed(case: Case) -> None:
    cluster = FakeCluster()
    h = Harness(cluster)
    h.add(node("n0", cpu=4))
    _add(cluster, case.input)
    h.cycle()
    messages = [
        e.get("message", "") for e in cluster.events(reason="FailedScheduling", involved_name="h")
    ]
    assert any(re.search(case.expect, m) for m in messages), messages
    condition = [
        c
        for c in cluster.get(PODS, "h", "default")["status"].get("conditions") or []
        if c["type"] == "PodScheduled"
    ]
    assert condition and condition[0]["status"] == "False"
    _ordinary_pods_keep_being_placed(h)
    assert h.node_of("h") is None


@pytest.mark.parametrize("case", cases(LOGGED))
def test_a_hostile_object_is_logged_by_name_and_the_rest_is_placed(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h = Harness(cluster)
        h.add(node("n0", cpu=4))
        _add(cluster, case.input)
        h.cycle()
        _ordinary_pods_keep_being_placed(h)
    messages = [r.getMessage() for r in caplog.records]
    assert any(re.search(case.expect, m) for m in messages), messages
