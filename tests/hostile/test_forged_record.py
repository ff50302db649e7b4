"""A forged durable record is checked against its pods before it is held (issue 32, attack 2).

A tenant can write ``fluence.flux-framework.org/allocation`` on a pod the admission
policy does not guard (a cluster without ``deploy/admission-policy.yaml``, or a pod made
before it). After a restart the scheduler must not trust it: not withhold the nodes it
names, not bind the pod where its nodeSelector forbids, not hold more than the pod asks.
Each test builds the cluster as the restart finds it, and the harness's scheduler starts
(restores) on it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.resource_config import parse_resource_config
from fluence_core.scheduler.restart.fallback import HELD_FROM_POD, RELEASED
from tests.scheduler.conftest import Harness, node, pod, pod_group
from tests.scheduler.parts import ONE_QPU, TWO_QPUS, WANTS_QPU

pytestmark = pytest.mark.usefixtures("clean_env")

TENANT = {"pool": "tenant"}


def _every_core(jobid: int, *nodes: str, cores: int = 4) -> dict[str, Any]:
    """An allocation holding every core and memory chunk of ``nodes``."""
    return {"jobid": jobid, "nodes": [
        {"node": n, "cores": list(range(cores)), "memory": list(range(cores)),
         "memory_mib": 16384, "pods": 1} for n in nodes]}


def _record(pods: list[str], **allocations: dict[str, Any]) -> str:
    return json.dumps([{"pods": pods, "allocations": allocations}])


def _forger(name: str = "forger", **extra: Any) -> dict[str, Any]:
    body = pod(name, "1", annotations={
        names.ALLOCATION_ANNOTATION: _record([name], compute=_every_core(7, "n1", "n2")),
        names.JOBIDS_ANNOTATION: "7"}, **extra)
    body["spec"]["nodeSelector"] = dict(TENANT)
    return body


def _harness(*objects: dict[str, Any], resources: str | None = None) -> Harness:
    cluster = FakeCluster()
    for obj in objects:
        resource = {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS}[obj["kind"]]
        cluster.create(resource, obj, obj["metadata"].get("namespace"))
    config = parse_resource_config(resources, "test-resources.yaml") if resources else None
    return Harness(cluster, config)


def _tenant_node(name: str) -> dict[str, Any]:
    body = node(name)
    body["metadata"]["labels"] = dict(TENANT)
    return body


def _annotations(h: Harness, resource: str, name: str) -> dict[str, str]:
    found = h.cluster.get(resource, name, "default")
    assert found is not None
    return dict(found["metadata"].get("annotations") or {})


def test_a_forged_record_on_a_pending_pod_withholds_no_node_and_binds_within_its_selector(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h = _harness(_tenant_node("n0"), node("n1"), node("n2"), _forger())
    h.cycle()
    assert h.node_of("forger") == "n0", "its nodeSelector allows n0 alone"
    assert not h.scheduler.matcher.allocations() or all(
        share.node == "n0" for a in h.scheduler.matcher.allocations().values()
        for share in a.nodes), "nothing is held on n1 or n2"
    h.add(pod("big-a", "4"), pod("big-b", "4"))
    h.cycle()
    assert {h.node_of("big-a"), h.node_of("big-b")} == {"n1", "n2"}, "both nodes are free"
    assert "the record of pods/default/forger (jobids [7]) is not trusted" in caplog.text
    assert "not bound" in caplog.text
    assert names.ALLOCATION_ANNOTATION not in _annotations(h, PODS, "forger"), \
        "the forged record is removed"
    events = h.cluster.events(reason=RELEASED, involved_name="forger")
    assert events and "not trusted" in events[0]["message"]


def test_a_forged_record_on_a_pending_pod_whose_selector_fits_no_node_leaves_it_pending(
) -> None:
    h = _harness(node("n1"), node("n2"), _forger())
    h.cycle()
    assert h.node_of("forger") is None, "no node carries pool=tenant"
    assert not h.scheduler.matcher.allocations()


def test_an_inflated_record_on_a_bound_pod_is_cut_to_what_the_pod_requests(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = _harness(node("n0"), pod("holder", "1", requests=WANTS_QPU), resources=ONE_QPU)
    h.cycle()
    assert h.node_of("holder") == "n0"
    record = json.loads(_annotations(h, PODS, "holder")[names.ALLOCATION_ANNOTATION])
    compute = record[0]["allocations"]["compute"]
    compute["nodes"][0]["cores"] = [0, 1, 2, 3]  # the pod asks for one core
    compute["nodes"][0]["memory"] = [0, 1, 2, 3]
    h.cluster.patch(PODS, "holder", {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: json.dumps(record)}}}, "default")
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h.restart()
    h.cycle()
    assert h.node_of("holder") == "n0", "a bound pod is never moved or deleted"
    h.add(pod("three", "3"), pod("second-qpu", "100m", requests=WANTS_QPU))
    h.cycle()
    assert h.node_of("three") == "n0", "the three cores the record took are free again"
    assert h.node_of("second-qpu") is None, "the qpu the holder asks for stays held"
    assert "holds 4 cores, its pods request 1" in caplog.text
    events = h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
    assert events and "holds 4 cores, its pods request 1" in events[0]["message"]


def test_a_record_on_a_bound_pod_naming_another_node_is_not_held() -> None:
    h = _harness(node("n0"), node("n1"), pod("holder", "1", requests=WANTS_QPU), resources=ONE_QPU)
    h.cycle()
    bound = h.node_of("holder")
    other = "n1" if bound == "n0" else "n0"
    record = json.loads(_annotations(h, PODS, "holder")[names.ALLOCATION_ANNOTATION])
    record[0]["allocations"]["compute"]["nodes"][0]["node"] = other
    h.cluster.patch(PODS, "holder", {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: json.dumps(record)}}}, "default")
    h.restart()
    held = {share.node for a in h.scheduler.matcher.allocations().values() for share in a.nodes}
    assert held == {bound}, "held on the node it runs on, nothing on the one the record names"
    events = h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
    assert events and f"names node {other}, the pod is bound to {bound}" in events[0]["message"]


def test_a_forged_podgroup_record_never_binds_a_member_against_its_selector() -> None:
    members = []
    for name in ("w0", "w1"):
        body = pod(name, "1", group="gang")
        body["spec"]["nodeSelector"] = dict(TENANT)
        members.append(body)
    group = pod_group("gang", 2)
    group["metadata"]["annotations"] = {
        names.ALLOCATION_ANNOTATION: _record(["w0", "w1"], compute={
            "jobid": 5, "nodes": [{"node": "n1", "cores": [0, 1], "memory": [0, 1],
                                   "memory_mib": 8192, "pods": 2}]}),
        names.JOBIDS_ANNOTATION: "5"}
    h = _harness(_tenant_node("n0"), node("n1"), group, *members)
    h.cycle()
    assert h.node_of("w0") == "n0" and h.node_of("w1") == "n0"
    held = {share.node for a in h.scheduler.matcher.allocations().values() for share in a.nodes}
    assert held == {"n0"}


def test_a_record_naming_a_pod_of_another_group_is_not_trusted() -> None:
    stranger = pod("stranger", "1", node_name="n1")
    body = pod("mine", "1", annotations={
        names.ALLOCATION_ANNOTATION: _record(["mine", "stranger"],
                                             compute=_every_core(9, "n1")),
        names.JOBIDS_ANNOTATION: "9"}, node_name="n1")
    h = _harness(node("n1"), stranger, body)
    h.add(pod("two", "2"))
    h.cycle()
    assert h.node_of("two") == "n1", "mine and stranger hold one core each, two is left"




def _patch_record(h: Harness, name: str, edit: Any) -> None:
    record = json.loads(_annotations(h, PODS, name)[names.ALLOCATION_ANNOTATION])
    edit(record[0]["allocations"])
    h.cluster.patch(PODS, name, {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: json.dumps(record)}}}, "default")


def test_a_record_holding_a_second_backend_is_cut_to_the_one_the_pod_requests() -> None:
    h = _harness(node("n0"), pod("holder", "1", requests=WANTS_QPU), resources=TWO_QPUS)
    h.cycle()
    held = {v.backend for a in h.scheduler.matcher.allocations().values() for v in a.virtual}
    other = ({"cepheus", "ankaa"} - held).pop()

    def both(allocations: dict[str, Any]) -> None:
        vertex = dict(allocations["qpu"]["virtual"][0])
        vertex.update(path=f"/cluster0/{other}0", name=f"{other}0", backend=other)
        allocations["qpu"]["virtual"].append(vertex)

    _patch_record(h, "holder", both)
    h.restart()
    h.add(pod("second", "100m", requests=WANTS_QPU))
    h.cycle()
    assert h.node_of("second") == "n0", f"{other} is free for the second pod"
    events = h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
    assert events and "it holds 2 virtual resources, its pods request 1" in events[0]["message"]


def test_a_record_holding_a_backend_the_pod_is_pinned_away_from_is_not_trusted() -> None:
    pinned = pod("holder", "1", requests=WANTS_QPU,
                 annotations={names.REQUIRE_BACKEND_ANNOTATION: "cepheus"})
    h = _harness(node("n0"), pinned, resources=TWO_QPUS)
    h.cycle()

    def elsewhere(allocations: dict[str, Any]) -> None:
        allocations["qpu"]["virtual"][0].update(path="/cluster0/ankaa0", name="ankaa0",
                                                backend="ankaa")

    _patch_record(h, "holder", elsewhere)
    h.restart()
    held = {v.backend for a in h.scheduler.matcher.allocations().values() for v in a.virtual}
    assert held == {"cepheus"}, "held where its pin and its backend annotation say"
    events = h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
    assert events and "ankaa0, which serves no virtual resource" in events[0]["message"]


def test_a_record_of_a_vertex_serving_the_type_through_its_subtree_is_trusted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nested = """
resources:
  - type: qdevice
    name: cepheus
    with: [{type: qpu}]
"""
    h = _harness(node("n0"), pod("holder", "1", requests=WANTS_QPU), resources=nested)
    h.cycle()
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h.restart()
    assert "not trusted" not in caplog.text
    assert not h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
    held = [v.type for a in h.scheduler.matcher.allocations().values() for v in a.virtual]
    assert held == ["qdevice"], "restored exactly: the qdevice whose subtree holds the qpu"
