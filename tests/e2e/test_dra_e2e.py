"""Dynamic Resource Allocation against a real kube-apiserver (skipped without KUBEBUILDER_ASSETS).

Fluence runs as ``fluence up`` does, in a thread; ResourceSlices are published by
hand (no DRA driver, no kubelet), each test with a driver and a DeviceClass of its
own so tests never see each other's devices. Where kube-controller-manager runs
beside the API server, pods use ResourceClaimTemplates and the resourceclaim
controller makes their claims; otherwise the test creates the claim and writes
the pod's ``status.resourceClaimStatuses`` as the controller would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import (
    DEVICE_CLASSES, NAMESPACES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, RESOURCE_SLICES,
)
from fluence_core.kube.client import KubeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request, make_node_dict,
    make_pod_dict, make_pod_group_dict, make_resource_claim_dict, make_resource_slice_dict,
)
from fluence_core.testing_apiserver import ApiServer, scheduler_beside, wait_for

pytestmark = pytest.mark.e2e


class Dra:
    """One test's nodes, driver, class and claims, in its namespace."""

    def __init__(self, kube: KubeCluster, namespace: str, templates: bool) -> None:
        self.kube, self.ns, self.templates = kube, namespace, templates
        self.driver = f"{namespace}.example.com"
        self.device_class = f"{namespace}-gpu"
        self.nodes: list[str] = []
        self.slices: list[str] = []
        self._running = ExitStack()
        kube.create(DEVICE_CLASSES, make_device_class_dict(
            self.device_class, f'device.driver == "{self.driver}"'))

    def start(self) -> Scheduler:
        self._running.close()
        return self._running.enter_context(scheduler_beside(self.kube, load_settings())).scheduler

    def close(self) -> None:
        self._running.close()
        for node in self.nodes:
            self.kube.delete("nodes", node)
        for name in self.slices:
            self.kube.delete(RESOURCE_SLICES, name)
        self.kube.delete(DEVICE_CLASSES, self.device_class)

    def node(self, suffix: str, devices: int, model: str = "t4") -> str:
        name = f"{self.ns}-{suffix}"
        self.kube.create("nodes", make_node_dict(name, 4, labels={"e2e-ns": self.ns},
                                                 capacity=True))
        self.nodes.append(name)
        self.slices.append(f"{name}-gpus")
        self.kube.create(RESOURCE_SLICES, make_resource_slice_dict(
            f"{name}-gpus", self.driver,
            [make_device(f"gpu{i}", {"model": model}) for i in range(devices)], node=name))
        return name

    def pod(self, name: str, count: int = 1, *selectors: str, group: str | None = None,
            cpu: str = "1", priority_class: str | None = None, **exactly: Any) -> str:
        """A pod with one claim of ``count`` devices; returns the claim's name (known at
        once for a named claim, once the controller made it for a template's)."""
        request = make_device_request("gpu", self.device_class, count, *selectors, **exactly)
        if self.templates:
            self.kube.create(RESOURCE_CLAIM_TEMPLATES, {
                "metadata": {"name": name}, "spec": {"spec": {"devices": {
                    "requests": [request]}}}}, self.ns)
            entries = claim_entries(gpu=f"template:{name}")
        else:
            self.kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(
                name, [request], namespace=None), self.ns)
            entries = claim_entries(gpu=name)
        spec: dict[str, Any] = {"priorityClassName": priority_class} if priority_class else {}
        self.kube.create("pods", make_pod_dict(
            name, cpu, namespace=None, group=group, nodeSelector={"e2e-ns": self.ns},
            resourceClaims=entries, **spec), self.ns)
        return name

    def claim_of(self, pod: str) -> dict[str, Any] | None:
        found = self.kube.get("pods", pod, self.ns) or {}
        if not self.templates:
            return self.kube.get(RESOURCE_CLAIMS, pod, self.ns)
        statuses = (found.get("status") or {}).get("resourceClaimStatuses") or []
        name = next((s.get("resourceClaimName") for s in statuses), None)
        return self.kube.get(RESOURCE_CLAIMS, name, self.ns) if name else None

    def node_of(self, pod: str) -> str | None:
        found = self.kube.get("pods", pod, self.ns)
        return None if found is None else found["spec"].get("nodeName")

    def devices_of(self, pod: str) -> list[str]:
        allocation = ((self.claim_of(pod) or {}).get("status") or {}).get("allocation") or {}
        return [f"{r['pool']}/{r['device']}" for r in allocation["devices"]["results"]] \
            if allocation else []

    def reason(self, pod: str) -> str:
        found = self.kube.get("pods", pod, self.ns) or {}
        conditions = (found.get("status") or {}).get("conditions") or []
        return next((str(c.get("message")) for c in conditions
                     if c.get("type") == "PodScheduled" and c.get("status") == "False"), "")


@pytest.fixture
def dra(apiserver: ApiServer, kube: KubeCluster, kube_namespace: str) -> Iterator[Dra]:
    found = Dra(kube, kube_namespace, templates=apiserver.controller_manager)
    try:
        yield found
    finally:
        found.close()


def test_a_pod_whose_only_matching_device_is_on_b_is_bound_to_b(dra: Dra) -> None:
    dra.node("a", 2)
    b = dra.node("b", 2, model="a100")
    dra.start()
    dra.pod("p", 1, f'device.attributes["{dra.driver}"].model == "a100"')
    wait_for(lambda: dra.node_of("p"), "p to be bound", 30)
    assert dra.node_of("p") == b
    claim = dra.claim_of("p")
    assert claim is not None
    pod = dra.kube.get("pods", "p", dra.ns)
    assert pod is not None
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}]
    assert dra.devices_of("p") == [f"{b}/gpu0"]
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0][
        "matchFields"][0]["values"] == [b]
    assert names.CLAIM_PROTECTION_FINALIZER in claim["metadata"]["finalizers"]


def test_a_gang_of_three_needing_two_devices_each_spreads_one_per_node(dra: Dra) -> None:
    nodes = [dra.node(f"n{i}", 2) for i in range(3)]
    dra.start()
    dra.kube.create("podgroups", make_pod_group_dict("g", 3, dra.ns), dra.ns)
    for i in range(3):
        dra.pod(f"g-{i}", 2, group="g")
    wait_for(lambda: all(dra.node_of(f"g-{i}") for i in range(3)), "the gang bound", 30)
    assert sorted(dra.node_of(f"g-{i}") or "" for i in range(3)) == sorted(nodes)
    taken = [d for i in range(3) for d in dra.devices_of(f"g-{i}")]
    assert len(taken) == 6 == len(set(taken))


def test_a_gang_of_two_shapes_gets_the_fit_a_member_by_member_placement_misses(
        dra: Dra) -> None:
    """g-0 asks for any GPU, g-1 for the a100 and two cores. Placed one at a time, g-0
    would take node a and its a100 first and g-1 fit nowhere; matched jointly, each
    claim is allocated on its member's node, in the match that places the gang."""
    a = dra.node("a", 1, model="a100")
    b = dra.node("b", 1, model="t4")
    dra.start()
    dra.kube.create("podgroups", make_pod_group_dict("g", 2, dra.ns), dra.ns)
    dra.pod("g-0", 1, group="g")
    dra.pod("g-1", 1, f'device.attributes["{dra.driver}"].model == "a100"', group="g",
            cpu="2")
    wait_for(lambda: dra.node_of("g-0") and dra.node_of("g-1"), "the gang bound", 30)
    assert (dra.node_of("g-0"), dra.node_of("g-1")) == (b, a)
    assert (dra.devices_of("g-0"), dra.devices_of("g-1")) == ([f"{b}/gpu0"], [f"{a}/gpu0"])


def test_a_restarted_scheduler_keeps_the_allocations_it_made(dra: Dra) -> None:
    node = dra.node("n0", 1)
    dra.start()
    dra.pod("first")
    wait_for(lambda: dra.node_of("first"), "first to be bound", 30)
    before = dra.devices_of("first")
    scheduler = dra.start()  # a new scheduler: everything read back from the cluster
    assert scheduler.view.dra.taken()
    dra.pod("second")
    wait_for(lambda: dra.reason("second"), "second told why it waits", 30)
    assert dra.node_of("second") is None
    assert dra.devices_of("second") == []
    assert dra.devices_of("first") == before == [f"{node}/gpu0"]


def test_an_out_of_scope_claim_gets_its_reason_and_no_node(dra: Dra) -> None:
    dra.node("n0", 2)
    namespace = dra.kube.get(NAMESPACES, dra.ns) or {}
    labels = dict(namespace.get("metadata", {}).get("labels") or {})
    labels["resource.kubernetes.io/admin-access"] = "true"  # what the API server asks for it
    dra.kube.patch(NAMESPACES, dra.ns, {"metadata": {"labels": labels}})
    dra.start()
    dra.pod("admin", adminAccess=True)
    wait_for(lambda: dra.claim_of("admin"), "the claim", 30)
    claim = dra.claim_of("admin") or {}
    if not claim["spec"]["devices"]["requests"][0]["exactly"].get("adminAccess"):
        pytest.skip("this API server drops adminAccess (DRAAdminAccess disabled)")
    wait_for(lambda: "adminAccess" in dra.reason("admin"), "the out-of-scope reason", 30)
    assert dra.node_of("admin") is None
    assert not (claim.get("status") or {}).get("allocation")


def test_a_finished_pods_device_is_released_by_the_controller_and_reused(
        apiserver: ApiServer, dra: Dra) -> None:
    if not apiserver.controller_manager:
        pytest.skip("no kube-controller-manager beside the API server: nothing releases claims")
    node = dra.node("n0", 1)
    dra.start()
    dra.pod("first")
    wait_for(lambda: dra.node_of("first"), "first to be bound", 30)
    dra.pod("second")
    wait_for(lambda: dra.reason("second"), "second told why it waits", 30)
    dra.kube.patch_status("pods", "first", {"status": {"phase": "Succeeded"}}, dra.ns)
    wait_for(lambda: dra.node_of("second"), "second bound once the device is released", 60)
    assert dra.node_of("second") == node and dra.devices_of("second") == [f"{node}/gpu0"]


def _evicted(dra: Dra, pod: str) -> bool:
    found = dra.kube.get("pods", pod, dra.ns)
    return found is None or bool(found["metadata"].get("deletionTimestamp"))


def test_a_pod_with_a_claim_preempts_for_a_device_only_low_priority_claims_hold(
        dra: Dra) -> None:
    """Every device is held by a low-priority pod's claim and cores abound: the
    high-priority pod evicts one of them, waits until its victim is gone and its claim
    deallocated, then binds with that device; nothing is allocated twice."""
    node = dra.node("n0", 2)
    classes = []
    for value in (10, 500):
        name = f"{dra.ns}-p{value}"
        dra.kube.create("priorityclasses", {"metadata": {"name": name}, "value": value})
        classes.append(name)
    try:
        dra.start()
        lows = [dra.pod(f"low-{i}", priority_class=classes[0]) for i in range(2)]
        wait_for(lambda: all(dra.node_of(p) for p in lows), "the low pods bound", 30)
        before = {p: dra.devices_of(p) for p in lows}
        assert sorted(sum(before.values(), [])) == [f"{node}/gpu0", f"{node}/gpu1"]
        dra.pod("high", priority_class=classes[1])
        wait_for(lambda: any(_evicted(dra, p) for p in lows), "a victim evicted", 30)
        victims = [p for p in lows if _evicted(dra, p)]
        assert len(victims) == 1, f"evicted {victims}: one device is enough"
        assert dra.node_of("high") is None, "bound beside its victim"
        victim = victims[0]
        freed = before[victim]
        claim = dra.claim_of(victim)
        # the test stands in for the kubelet; the resourceclaim controller (or the test,
        # without one) deallocates the victim's claim
        dra.kube.delete("pods", victim, dra.ns, grace_period_seconds=0)
        if not dra.templates and claim is not None:
            dra.kube.patch_status(RESOURCE_CLAIMS, victim, {"status": {
                "allocation": None, "reservedFor": None}}, dra.ns)
        wait_for(lambda: dra.node_of("high"), "high bound once its victim is gone", 30)
        assert dra.node_of("high") == node
        assert dra.devices_of("high") == freed
        survivor = next(p for p in lows if p != victim)
        assert dra.devices_of(survivor) == before[survivor]
        assert not set(dra.devices_of("high")) & set(dra.devices_of(survivor))
    finally:
        for name in classes:
            dra.kube.delete("priorityclasses", name)
