"""Fluence against kube-scheduler v1.36 on DRA claims: bind or not, where, and which devices.

Each fixed case publishes ResourceSlices on hand-made nodes, a DeviceClass, and
claims already allocated to someone else (devices taken). The same pod with a
claim of its own is then placed once by kube-scheduler and once by Fluence (each
with a fresh claim, deleted with its pod after). Both must agree on bind versus
no-bind. Where both bind, Fluence's node must be one kube-scheduler accepts (a
copy pinned there by node affinity binds under kube-scheduler), and the devices
Fluence allocated must be as many as asked, distinct, reachable from its node and
none of them taken. The table is printed (``-s`` shows it).

Skipped without ``KUBEBUILDER_ASSETS`` or without kube-scheduler.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fluence_core.kube.api import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request, make_node_dict,
    make_pod_dict, make_pod_group_dict, make_resource_claim_dict, make_resource_slice_dict,
)
from tests.e2e.peer import with_kube_scheduler
from fluence_core.testing_apiserver import (
    ApiServer, ensure_namespace, scheduler_beside, wait_for,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "dra-fidelity"
DRIVER = "gpu.fidelity.example.com"
CLASS = "fidelity-gpu"
A100 = f'device.attributes["{DRIVER}"].model == "a100"'


@dataclass
class Case:
    name: str
    nodes: dict[str, dict[str, str]]
    """Node name -> its labels."""
    slices: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    constraints: list[dict[str, Any]] = field(default_factory=list)
    taken: list[tuple[str, str]] = field(default_factory=list)
    """(pool, device) allocated to a claim of someone else's before the pod comes."""
    kube_binds: bool = True
    """Whether kube-scheduler v1.36 evicts: not for devices (its DRA filter's "cannot
    allocate all claims" makes preemption "not helpful"), nor for a gang's pods (with
    WorkloadAwarePreemption on, a gang's pod is "not eligible" for pod preemption)."""


def _gpus(node: str, *models: str, numa: list[int] | None = None,
          memory: list[str] | None = None, generation: int = 1, count: int = 1,
          name: str | None = None) -> dict[str, Any]:
    devices = []
    for i, model in enumerate(models):
        attributes: dict[str, Any] = {"model": model}
        if numa is not None:
            attributes["numa"] = numa[i]
        devices.append(make_device(f"gpu{i}", attributes,
                                   {"memory": memory[i]} if memory else None))
    return make_resource_slice_dict(name or f"{node}-gpus", DRIVER, devices, node=node,
                                    pool=node, generation=generation, slice_count=count)


def _request(count: int = 1, *selectors: str, **more: Any) -> dict[str, Any]:
    return make_device_request("r", CLASS, count, *selectors, **more)


def cases() -> list[Case]:
    two = {"a": {}, "b": {}}
    return [
        Case("only b has the device asked for", two,
             [_gpus("a", "t4", "t4"), _gpus("b", "a100")], [_request(1, A100)]),
        Case("no device matches", two, [_gpus("a", "t4"), _gpus("b", "t4")],
             [_request(1, A100)], kube_binds=False),
        Case("two devices, one per node", two, [_gpus("a", "t4"), _gpus("b", "t4")],
             [_request(2)], kube_binds=False),
        Case("matchAttribute numa: only b has two on one zone", two,
             [_gpus("a", "t4", "t4", numa=[0, 1]), _gpus("b", "t4", "t4", numa=[1, 1])],
             [_request(2)], constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
        Case("firstAvailable falls back to one device", two,
             [_gpus("a", "t4"), _gpus("b", "t4")],
             [{"name": "r", "firstAvailable": [
                 {"name": "big", "deviceClassName": CLASS, "count": 3},
                 {"name": "small", "deviceClassName": CLASS, "count": 1}]}]),
        Case("All: a has one of its two taken", two,
             [_gpus("a", "t4", "t4"), _gpus("b", "t4", "t4")],
             [_request(mode="All")], taken=[("a", "gpu0")]),
        Case("every device of a is taken", two, [_gpus("a", "a100"), _gpus("b", "a100")],
             [_request(1, A100)], taken=[("a", "gpu0")]),
        Case("every device is taken", two, [_gpus("a", "a100"), _gpus("b", "a100")],
             [_request(1, A100)], taken=[("a", "gpu0"), ("b", "gpu0")], kube_binds=False),
        Case("a's pool is incomplete", two,
             [_gpus("a", "a100", count=2), _gpus("b", "a100")], [_request(1, A100)]),
        Case("a's newest generation has no a100", two,
             [_gpus("a", "a100", name="a-old"), _gpus("a", "t4", generation=2, name="a-new"),
              _gpus("b", "a100")], [_request(1, A100)]),
        Case("capacity: only b has 40Gi", two,
             [_gpus("a", "t4", memory=["16Gi"]), _gpus("b", "t4", memory=["80Gi"])],
             [_request(1, f'device.capacity["{DRIVER}"].memory'
                          '.compareTo(quantity("40Gi")) >= 0')]),
        Case("a network device reaches rack r2 only", {"a": {"rack": "r1"}, "b": {"rack": "r2"}},
             [make_resource_slice_dict(
                 "rack-qpus", DRIVER, [make_device("qpu0", {"model": "a100"})],
                 node_selector={"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "rack", "operator": "In", "values": ["r2"]}]}]},
                 pool="rack-qpus")], [_request(1, A100)]),
    ]


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from with_kube_scheduler(tmp_path_factory, "dra-fidelity")


def _node_name(case: int, node: str) -> str:
    return f"d{case}-{node}"


def _renamed(index: int, obj: dict[str, Any]) -> dict[str, Any]:
    """A slice with its node and pool names made unique to the case."""
    body = copy.deepcopy(obj)
    spec = body["spec"]
    body["metadata"]["name"] = f"d{index}-{body['metadata']['name']}"
    spec["pool"]["name"] = f"d{index}-{spec['pool']['name']}"
    if spec.get("nodeName"):
        spec["nodeName"] = _node_name(index, spec["nodeName"])
    return body


def _set_up(kube: KubeCluster, index: int, case: Case) -> None:
    for node, labels in case.nodes.items():
        kube.create("nodes", make_node_dict(_node_name(index, node), 4, capacity=True,
                                            labels={"dra-case": str(index), **labels}))
    for slice_obj in case.slices:
        kube.create(RESOURCE_SLICES, _renamed(index, slice_obj))
    for number, (pool, device) in enumerate(case.taken):
        name = f"d{index}-taken{number}"
        kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(
            name, [_request()], namespace=None), NAMESPACE)
        kube.patch_status(RESOURCE_CLAIMS, name, {"status": {"allocation": {"devices": {
            "results": [{"request": "r", "driver": DRIVER, "pool": f"d{index}-{pool}",
                         "device": device}]}}}}, NAMESPACE)


def _drop_claim(kube: KubeCluster, name: str) -> None:
    try:
        kube.patch_status(RESOURCE_CLAIMS, name, {"status": {
            "allocation": None, "reservedFor": None}}, NAMESPACE)
        kube.patch(RESOURCE_CLAIMS, name, {"metadata": {"finalizers": None}}, NAMESPACE)
    except ApiError:
        pass
    kube.delete(RESOURCE_CLAIMS, name, NAMESPACE)


def _tear_down(kube: KubeCluster, index: int, case: Case) -> None:
    for number in range(len(case.taken)):
        _drop_claim(kube, f"d{index}-taken{number}")
    for slice_obj in case.slices:
        kube.delete(RESOURCE_SLICES, _renamed(index, slice_obj)["metadata"]["name"])
    for node in case.nodes:
        kube.delete("nodes", _node_name(index, node))
    time.sleep(0.3)  # kube-scheduler's informers hear of it


def _pod(index: int, case: Case, name: str, scheduler: str,
         node: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    claim = make_resource_claim_dict(name, case.requests, constraints=case.constraints,
                                     namespace=None)
    spec: dict[str, Any] = {"nodeSelector": {"dra-case": str(index)}}
    if node is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    pod = make_pod_dict(name, "100m", namespace=None, scheduler=scheduler,
                        resourceClaims=claim_entries(gpu=name), **spec)
    return claim, pod


def _place_with_kube(kube: KubeCluster, index: int, case: Case, name: str,
                     node: str | None = None) -> tuple[str | None, str]:
    claim, pod = _pod(index, case, name, "default-scheduler", node)
    kube.create(RESOURCE_CLAIMS, claim, NAMESPACE)
    kube.create("pods", pod, NAMESPACE)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = kube.get("pods", name, NAMESPACE) or {}
            if (found.get("spec") or {}).get("nodeName"):
                return found["spec"]["nodeName"], ""
            for condition in (found.get("status") or {}).get("conditions") or ():
                if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                    return None, str(condition.get("message"))
            time.sleep(0.05)
        raise AssertionError(f"kube-scheduler said nothing about {name}")
    finally:
        kube.delete("pods", name, NAMESPACE, grace_period_seconds=0)
        _drop_claim(kube, name)


def _place_with_fluence(kube: KubeCluster, index: int, case: Case,
                        name: str) -> tuple[str | None, str, list[tuple[str, str]]]:
    claim, pod = _pod(index, case, name, "fluence")
    kube.create(RESOURCE_CLAIMS, claim, NAMESPACE)
    kube.create("pods", pod, NAMESPACE)
    try:
        scheduler = Scheduler(kube, load_settings())
        scheduler.start()
        results = {r.group: r for r in scheduler.schedule_once()}
        placed = results.get(f"{NAMESPACE}/{name}")
        assert placed is not None, f"fluence did not try {name}: {results}"
        stored = kube.get(RESOURCE_CLAIMS, name, NAMESPACE) or {}
        allocation = (stored.get("status") or {}).get("allocation") or {}
        devices = [(r["pool"], r["device"]) for r in
                   (allocation.get("devices") or {}).get("results") or []]
        return placed.placed.get(f"{NAMESPACE}/{name}"), placed.reason or "", devices
    finally:
        kube.delete("pods", name, NAMESPACE, grace_period_seconds=0)
        _drop_claim(kube, name)


def _invalid(index: int, case: Case, node: str, devices: list[tuple[str, str]]) -> str | None:
    """Why Fluence's devices could not be a valid allocation on ``node``, or None."""
    taken = {(f"d{index}-{pool}", device) for pool, device in case.taken}
    if len(set(devices)) != len(devices):
        return f"a device allocated twice: {devices}"
    if taken & set(devices):
        return f"a taken device allocated: {sorted(taken & set(devices))}"
    local = {_renamed(index, s)["spec"]["pool"]["name"]: _renamed(index, s)["spec"].get(
        "nodeName") for s in case.slices}
    far = [d for d in devices if local.get(d[0]) not in (None, node)]
    return f"devices out of reach of {node}: {far}" if far else None


def test_fluence_allocates_claims_where_kube_scheduler_does(control_plane: ApiServer) -> None:
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    if kube.get(DEVICE_CLASSES, CLASS) is None:
        kube.create(DEVICE_CLASSES, make_device_class_dict(CLASS, f'device.driver == "{DRIVER}"'))
    problems = []
    print("\nDRA cases (kube-scheduler v1.36 vs fluence):")
    for index, case in enumerate(cases()):
        _set_up(kube, index, case)
        time.sleep(0.3)
        try:
            kube_node, kube_why = _place_with_kube(kube, index, case, f"d{index}-k")
            node, why, devices = _place_with_fluence(kube, index, case, f"d{index}-f")
            verdict = (f"kube {'binds ' + kube_node if kube_node else 'refuses'}, "
                       f"fluence {'binds ' + node if node else 'refuses'}")
            problem = None
            if (kube_node is None) != (node is None):
                problem = f"disagree (kube: {kube_why}; fluence: {why})"
            elif case.kube_binds != (kube_node is not None):
                problem = f"kube-scheduler was to {'bind' if case.kube_binds else 'refuse'}"
            elif node is not None:
                accepted, _ = _place_with_kube(kube, index, case, f"d{index}-p", node)
                problem = None if accepted else f"kube-scheduler refuses fluence's node {node}"
                problem = problem or _invalid(index, case, node, devices)
                verdict += f" {devices}"
            print(f"  {case.name:50s} {verdict}" + (f"  DISAGREE {problem}" if problem else ""))
            if problem:
                problems.append(f"{case.name}: {problem}")
        finally:
            _tear_down(kube, index, case)
    assert not problems, "\n".join(problems)


def _gang(kube: KubeCluster, index: int, name: str, scheduler: str, size: int,
          count: int) -> list[str]:
    """A PodGroup of ``size`` pods, each with a claim of ``count`` devices."""
    kube.create("podgroups", make_pod_group_dict(name, size, NAMESPACE), NAMESPACE)
    pods = []
    for m in range(size):
        member = f"{name}-{m}"
        kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(
            member, [_request(count)], namespace=None), NAMESPACE)
        kube.create("pods", make_pod_dict(
            member, "100m", namespace=None, scheduler=scheduler, group=name,
            nodeSelector={"dra-case": str(index)}, resourceClaims=claim_entries(gpu=member)),
            NAMESPACE)
        pods.append(member)
    return pods


def _drop_gang(kube: KubeCluster, name: str, pods: list[str]) -> None:
    for member in pods:
        kube.delete("pods", member, NAMESPACE, grace_period_seconds=0)
        _drop_claim(kube, member)
    kube.delete("podgroups", name, NAMESPACE)


def _gang_devices(kube: KubeCluster, pods: list[str]) -> dict[str, list[str]]:
    found = {}
    for member in pods:
        claim = kube.get(RESOURCE_CLAIMS, member, NAMESPACE) or {}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        found[member] = [r["pool"] for r in (allocation.get("devices") or {}).get("results", [])]
    return found


@pytest.mark.parametrize("nodes, binds", [(3, True), (2, False)],
                         ids=["three-nodes-of-two", "two-nodes-of-two"])
def test_a_gang_needing_two_devices_a_member_is_placed_as_kube_scheduler_places_it(
        control_plane: ApiServer, nodes: int, binds: bool) -> None:
    """A gang of 3, each member asking for 2 devices, on nodes of 2 devices each: both
    schedulers spread it one member per node, or both leave it pending whole."""
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    if kube.get(DEVICE_CLASSES, CLASS) is None:
        kube.create(DEVICE_CLASSES, make_device_class_dict(CLASS, f'device.driver == "{DRIVER}"'))
    index = 100 + nodes
    case = Case("gang", {f"n{i}": {} for i in range(nodes)},
                [_gpus(f"n{i}", "t4", "t4") for i in range(nodes)], [_request(2)])
    _set_up(kube, index, case)
    time.sleep(0.3)
    try:
        theirs = _gang(kube, index, f"gk{nodes}", "default-scheduler", 3, 2)
        try:
            if binds:
                wait_for(lambda: all((kube.get("pods", p, NAMESPACE) or {}).get("spec", {})
                                     .get("nodeName") for p in theirs), "kube's gang bound", 30)
            else:
                time.sleep(5)
            kube_nodes = [(kube.get("pods", p, NAMESPACE) or {})["spec"].get("nodeName")
                          for p in theirs]
        finally:
            _drop_gang(kube, f"gk{nodes}", theirs)
        time.sleep(0.5)
        ours = _gang(kube, index, f"gf{nodes}", "fluence", 3, 2)
        try:
            scheduler = Scheduler(kube, load_settings())
            scheduler.start()
            scheduler.schedule_once()
            fluence_nodes = [(kube.get("pods", p, NAMESPACE) or {})["spec"].get("nodeName")
                             for p in ours]
            devices = _gang_devices(kube, ours)
        finally:
            _drop_gang(kube, f"gf{nodes}", ours)
        print(f"\n  gang of 3 x 2 devices on {nodes} nodes of 2: kube {kube_nodes}, "
              f"fluence {fluence_nodes}")
        if binds:
            assert len(set(kube_nodes)) == 3 and len(set(fluence_nodes)) == 3
            assert all(devices[p] == [n, n] for p, n in zip(ours, fluence_nodes, strict=True))
        else:
            assert kube_nodes == [None] * 3 and fluence_nodes == [None] * 3
            assert all(not d for d in devices.values())
    finally:
        _tear_down(kube, index, case)


@dataclass
class Preemption:
    """A preemption case: ``nodes`` nodes of 4 cores and ``per_node`` devices, each with
    ``per_node`` low-priority pods of ``low_cpu`` (each with a claim of one device when
    ``low_claims``), then a high-priority preemptor of ``members`` pods (a gang when more
    than one) of ``high_cpu``, each asking for ``count`` devices."""

    name: str
    nodes: int
    per_node: int
    members: int
    count: int
    low_cpu: str = "100m"
    high_cpu: str = "100m"
    low_claims: bool = True
    kube_preempts: bool = True
    """What kube-scheduler must answer (the case is built to make it)."""


@dataclass
class PreemptionRun:
    evicted: list[str]
    nodes: list[str | None]
    """Each preemptor member's node (None: not bound)."""
    problem: str | None


PREEMPTIONS = [
    Preemption("a pod with a claim, low pods hold the cores", 1, 2, 1, 1, low_cpu="2",
               high_cpu="2", low_claims=False),
    Preemption("a gang of 2 x 2 devices, low pods hold the cores", 2, 2, 2, 2, low_cpu="2",
               high_cpu="2", low_claims=False, kube_preempts=False),
    Preemption("a pod with a claim, low claims hold every device", 1, 2, 1, 1,
               kube_preempts=False),
    Preemption("a gang of 2 x 2 devices, low claims hold every device", 2, 2, 2, 2,
               kube_preempts=False),
]
LOW_PRIORITY, HIGH_PRIORITY = 10, 500


def _low_pods(kube: KubeCluster, index: int, case: Preemption, run: str,
              scheduler: str) -> list[str]:
    lows = []
    for n in range(case.nodes):
        for d in range(case.per_node):
            name = f"{run}-low-{n}-{d}"
            more: dict[str, Any] = {}
            if case.low_claims:
                kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(
                    name, [_request()], namespace=None), NAMESPACE)
                more["resourceClaims"] = claim_entries(gpu=name)
            kube.create("pods", make_pod_dict(
                name, case.low_cpu, namespace=None, scheduler=scheduler,
                priorityClassName=f"{NAMESPACE}-p{LOW_PRIORITY}",
                nodeSelector={"dra-case": str(index), "dra-node": f"n{n}"}, **more), NAMESPACE)
            lows.append(name)
    return lows


def _preemptor(kube: KubeCluster, index: int, case: Preemption, run: str,
               scheduler: str) -> list[str]:
    group = f"{run}-high" if case.members > 1 else None
    if group is not None:
        kube.create("podgroups", make_pod_group_dict(group, case.members, NAMESPACE), NAMESPACE)
    members = []
    for m in range(case.members):
        name = f"{run}-high-{m}"
        kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(
            name, [_request(case.count)], namespace=None), NAMESPACE)
        kube.create("pods", make_pod_dict(
            name, case.high_cpu, namespace=None, scheduler=scheduler, group=group,
            priorityClassName=f"{NAMESPACE}-p{HIGH_PRIORITY}",
            nodeSelector={"dra-case": str(index)}, resourceClaims=claim_entries(gpu=name)),
            NAMESPACE)
        members.append(name)
    return members


def _claimed(kube: KubeCluster, name: str) -> list[tuple[str, str]]:
    claim = kube.get(RESOURCE_CLAIMS, name, NAMESPACE) or {}
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [(r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get("results")
            or []]


def _gone_or_going(kube: KubeCluster, pod: str) -> bool:
    found = kube.get("pods", pod, NAMESPACE)
    return found is None or bool(found["metadata"].get("deletionTimestamp"))


def _scheduled_message(kube: KubeCluster, pod: str) -> str:
    found = kube.get("pods", pod, NAMESPACE) or {}
    return next((str(c.get("message")) for c in (found.get("status") or {}).get("conditions")
                 or () if c.get("type") == "PodScheduled"), "no PodScheduled condition")


def _preempt_with(kube: KubeCluster, index: int, case: Preemption, run: str,
                  scheduler: str) -> PreemptionRun:
    """Bind the low pods, add the preemptor, stand in for the kubelet (the victims go) and
    the resourceclaim controller (their claims are deallocated), and see where it binds."""
    for n in range(case.nodes):
        node = _node_name(index, f"n{n}")
        kube.create("nodes", make_node_dict(node, 4, capacity=True, labels={
            "dra-case": str(index), "dra-node": f"n{n}"}))
        kube.create(RESOURCE_SLICES, _renamed(index, _gpus(f"n{n}", *["t4"] * case.per_node)))
    time.sleep(0.3)
    lows, members = _low_pods(kube, index, case, run, scheduler), []
    try:
        node_of = {p: "" for p in lows}

        def bound(pods: list[str]) -> bool:
            for pod in pods:
                node_of[pod] = ((kube.get("pods", pod, NAMESPACE) or {}).get("spec") or {}
                                ).get("nodeName") or ""
            return all(node_of[p] for p in pods)

        wait_for(lambda: bound(lows), f"{scheduler}'s low pods bound", 30)
        members = _preemptor(kube, index, case, run, scheduler)
        try:
            wait_for(lambda: any(_gone_or_going(kube, p) for p in lows), "a victim", 30)
        except AssertionError:
            return PreemptionRun([], [None] * len(members),
                                 f"no victim: {_scheduled_message(kube, members[0])}")
        time.sleep(2)  # every eviction of one preemption is issued before it is nominated
        evicted = [p for p in lows if _gone_or_going(kube, p)]
        for pod in evicted:
            kube.delete("pods", pod, NAMESPACE, grace_period_seconds=0)
            if case.low_claims:
                kube.patch_status(RESOURCE_CLAIMS, pod, {"status": {
                    "allocation": None, "reservedFor": None}}, NAMESPACE)
        try:
            wait_for(lambda: bound(members), f"{scheduler}'s preemptor bound", 30)
        except AssertionError:
            pass
        nodes = [node_of.get(m) or None for m in members]
        problem = None
        if any(n is None for n in nodes):
            problem = "the preemptor is not bound whole"
        everyone = [d for p in lows + members if p not in evicted for d in _claimed(kube, p)]
        if len(everyone) != len(set(everyone)):
            problem = f"a device allocated twice: {sorted(everyone)}"
        for member, node in zip(members, nodes, strict=True):
            mine = _claimed(kube, member)
            if node is not None and (len(mine) != case.count
                                     or any(pool != node for pool, _ in mine)):
                problem = f"{member} on {node} holds {mine}"
        return PreemptionRun(evicted, nodes, problem)
    finally:
        for pod in lows + members:
            kube.delete("pods", pod, NAMESPACE, grace_period_seconds=0)
            _drop_claim(kube, pod)
        if case.members > 1:
            kube.delete("podgroups", f"{run}-high", NAMESPACE)
        for n in range(case.nodes):
            kube.delete(RESOURCE_SLICES, f"d{index}-n{n}-gpus")
            kube.delete("nodes", _node_name(index, f"n{n}"))
        time.sleep(0.3)


def test_a_preemptor_with_claims_evicts_as_kube_scheduler_does(
        control_plane: ApiServer) -> None:
    """kube-scheduler and Fluence each preempt for a pod, then a gang, whose claims only
    low-priority claims' devices can satisfy: both evict as many, both end with every
    claim allocated on its member's node, and no device allocated twice."""
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    if kube.get(DEVICE_CLASSES, CLASS) is None:
        kube.create(DEVICE_CLASSES, make_device_class_dict(CLASS, f'device.driver == "{DRIVER}"'))
    for value in (LOW_PRIORITY, HIGH_PRIORITY):
        if kube.get("priorityclasses", f"{NAMESPACE}-p{value}") is None:
            kube.create("priorityclasses", {"metadata": {"name": f"{NAMESPACE}-p{value}"},
                                            "value": value})
    problems = []
    rows = []
    for number, case in enumerate(PREEMPTIONS):
        index = 200 + 2 * number
        theirs = _preempt_with(kube, index, case, f"pk{number}", "default-scheduler")
        with scheduler_beside(kube, load_settings()):
            ours = _preempt_with(kube, index + 1, case, f"pf{number}", "fluence")
        rows.append((case.name, theirs, ours))
        if ours.problem:
            problems.append(f"{case.name}: fluence: {ours.problem}")
        if not case.kube_preempts:
            if theirs.evicted:
                problems.append(f"{case.name}: kube-scheduler was not to preempt: "
                                f"{theirs.evicted}")
            continue
        if theirs.problem:
            problems.append(f"{case.name}: kube: {theirs.problem}")
        if len(theirs.evicted) != len(ours.evicted):
            problems.append(f"{case.name}: kube evicts {theirs.evicted}, fluence {ours.evicted}")
    print("\nDRA preemption (kube-scheduler v1.36 vs fluence):")
    print(f"  {'case':58s} {'kube: evicted, nodes':34s} fluence: evicted, nodes")
    for name, theirs, ours in rows:
        def shown(run: PreemptionRun) -> str:
            nodes = sorted(n.split("-", 1)[1] if n else "-" for n in run.nodes)
            return f"{len(run.evicted)}, {','.join(nodes)}" + (" !" if run.problem else "")
        print(f"  {name:58s} {shown(theirs):34s} {shown(ours)}")
        for who, run in (("kube", theirs), ("fluence", ours)):
            if run.problem:
                print(f"    {who}: {run.problem}")
    assert not problems, "\n".join(problems)
