"""The QPU DRA driver against a real kube-apiserver, with Fluence and kube-scheduler v1.36.

The driver publishes a resources file of two backends (``east``: 80 qubits in
us-east-1; ``west``: 108 qubits in us-west-1) as network-attached devices; the
API server's validation of the slices is part of the test. DeviceClasses come
from ``deploy/qpu-driver.yaml`` as shipped. Pods of both schedulers then ask for
one ``qpu`` each by CEL over the file's attributes, on the same API server:
kube-scheduler allocates one backend, Fluence the other and refuses the one
kube-scheduler holds, kube-scheduler then finds none left; across all claims no
device is allocated twice. A changed file is published at the next generation
with the same device names, so the held backends stay held; the kubelet plugin
prepares Fluence's claim, as stored, into a CDI spec naming its backend. A
backend kube-scheduler allocated to a claim is not given by Fluence for the
extended resource either, before or after a restart of Fluence.

Skipped without ``KUBEBUILDER_ASSETS`` or without kube-scheduler.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_core import names
from fluence_core.kube.api import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.kube.client import KubeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import (
    claim_entries, make_device_request, make_node_dict, make_pod_dict, make_pod_group_dict,
    make_resource_claim_dict,
)
from tests.e2e.peer import with_kube_scheduler
from fluence_core.testing_apiserver import (
    ApiServer, ensure_namespace, wait_for,
)
from fluence_dra_qpu.driver import QpuDriver
from fluence_dra_qpu.kubelet import Preparer
from fluence_dra_qpu.protocol import dra_pb2
from fluence_dra_qpu.publisher import SlicePublisher

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "qpu-driver"
FILE = names.RESOURCE_DOMAIN
RESOURCES = """\
resources:
  - type: qpu
    name: east
    attributes: {provider: braket, region: us-east-1, qubits: 80}
  - type: qpu
    name: west
    attributes: {provider: braket, region: us-west-1, qubits: 108}
"""
EAST = f'device.attributes["{FILE}"].region == "us-east-1"'
BIG = f'device.attributes["{FILE}"].qubits >= 100'


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from with_kube_scheduler(tmp_path_factory, "qpu-driver")


def _shipped_device_classes() -> list[dict[str, Any]]:
    documents = yaml.safe_load_all((ROOT / "deploy" / "qpu-driver.yaml").read_text())
    return [d for d in documents if d and d.get("kind") == "DeviceClass"]


def _ask(kube: KubeCluster, name: str, scheduler: str, *selectors: str) -> None:
    """A pod of ``scheduler`` with a claim of its own for one qpu matching ``selectors``."""
    kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(name, [make_device_request(
        "qpu", names.QPU_DEVICE_CLASS, 1, *selectors)], namespace=None), NAMESPACE)
    kube.create("pods", make_pod_dict(name, "100m", namespace=None, scheduler=scheduler,
                                      nodeSelector={"qpu-e2e": "yes"},
                                      resourceClaims=claim_entries(qpu=name)), NAMESPACE)


def _node_of(kube: KubeCluster, pod: str) -> str | None:
    found = kube.get("pods", pod, NAMESPACE) or {}
    return (found.get("spec") or {}).get("nodeName")


def _unschedulable(kube: KubeCluster, pod: str) -> str | None:
    found = kube.get("pods", pod, NAMESPACE) or {}
    for condition in (found.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message"))
    return None


def _devices(kube: KubeCluster, claim: str) -> list[str]:
    stored = kube.get(RESOURCE_CLAIMS, claim, NAMESPACE) or {}
    allocation = (stored.get("status") or {}).get("allocation") or {}
    return [f"{r['driver']}/{r['pool']}/{r['device']}"
            for r in (allocation.get("devices") or {}).get("results") or []]


def _fluence_pass(kube: KubeCluster) -> None:
    scheduler = Scheduler(kube, load_settings())
    scheduler.start()
    scheduler.schedule_once()


def test_both_schedulers_allocate_the_drivers_qpus_and_neither_double_books(
        control_plane: ApiServer, tmp_path: Path) -> None:
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    for device_class in _shipped_device_classes():
        kube.create(DEVICE_CLASSES, device_class)
    for node in ("qa", "qb"):
        kube.create("nodes", make_node_dict(node, 4, capacity=True, labels={"qpu-e2e": "yes"}))
    resources = tmp_path / "resources.yaml"
    resources.write_text(RESOURCES)
    driver = QpuDriver(SlicePublisher(kube), resources, 1.0)

    first = driver.step()
    assert first is not None and first.published == {"cluster": 1}
    [published] = kube.list(RESOURCE_SLICES).items
    assert published["spec"]["allNodes"] is True
    assert [d["name"] for d in published["spec"]["devices"]] == ["east0", "west0"]
    time.sleep(0.5)  # kube-scheduler's informers hear of the slice

    # kube-scheduler takes east
    _ask(kube, "kube-east", "default-scheduler", EAST)
    wait_for(lambda: _node_of(kube, "kube-east"), "kube-scheduler to bind kube-east", 30)
    east = f"{names.QPU_DRA_DRIVER}/cluster/east0"
    assert _devices(kube, "kube-east") == [east]

    # Fluence sees east taken: refuses a second east, places the big one on west
    _ask(kube, "fluence-east", "fluence", EAST)
    _ask(kube, "fluence-big", "fluence", BIG)
    _fluence_pass(kube)
    assert _node_of(kube, "fluence-east") is None
    assert _devices(kube, "fluence-east") == []
    assert _node_of(kube, "fluence-big") in ("qa", "qb")
    west = f"{names.QPU_DRA_DRIVER}/cluster/west0"
    assert _devices(kube, "fluence-big") == [west]
    claim = kube.get(RESOURCE_CLAIMS, "fluence-big", NAMESPACE) or {}
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["fluence-big"]

    # a changed file: the next generation, the same devices, still held
    resources.write_text(RESOURCES.replace("qubits: 108", "qubits: 120"))
    second = driver.step()
    assert second is not None and second.published == {"cluster": 2}
    [republished] = kube.list(RESOURCE_SLICES).items
    assert republished["spec"]["pool"]["generation"] == 2
    time.sleep(0.5)

    # kube-scheduler finds no qpu left: both are allocated
    _ask(kube, "kube-any", "default-scheduler")
    message = wait_for(lambda: _unschedulable(kube, "kube-any"),
                       "kube-scheduler to report kube-any unschedulable", 30)
    assert _node_of(kube, "kube-any") is None
    assert _devices(kube, "kube-any") == []
    print(f"\n  kube-scheduler on kube-any: {message}")

    # and Fluence, asked for any qpu, finds none either
    _ask(kube, "fluence-any", "fluence")
    _fluence_pass(kube)
    assert _node_of(kube, "fluence-any") is None

    allocated = [d for c in kube.list(RESOURCE_CLAIMS, NAMESPACE).items
                 for d in _devices(kube, c["metadata"]["name"])]
    print(f"  allocated: {sorted(allocated)}")
    assert sorted(allocated) == sorted([east, west])

    # the kubelet plugin prepares Fluence's claim as the API server stores it
    stored = kube.get(RESOURCE_CLAIMS, "fluence-big", NAMESPACE) or {}
    uid = stored["metadata"]["uid"]
    preparer = Preparer(kube, resources, tmp_path / "cdi")
    answer = preparer.prepare(dra_pb2.Claim(namespace=NAMESPACE, name="fluence-big", uid=uid))
    assert answer.error == ""
    assert [(d.pool_name, d.device_name) for d in answer.devices] == [("cluster", "west0")]
    spec = json.loads((tmp_path / "cdi" / f"fluence-qpu-{uid}.json").read_text())
    env = spec["devices"][0]["containerEdits"]["env"]
    assert "FLUXION_BACKEND=west" in env and "FLUXION_QUBITS=120" in env

    for pending in ("fluence-east", "kube-any", "fluence-any"):  # not to take later devices
        kube.delete("pods", pending, NAMESPACE, grace_period_seconds=0)
        kube.delete(RESOURCE_CLAIMS, pending, NAMESPACE)


def test_the_command_publishes_once_and_a_second_run_changes_nothing(
        control_plane: ApiServer, tmp_path: Path) -> None:
    """``fluence qpu-driver --once`` run twice, as a restarted driver would be: one
    generation, the same slice."""
    kube = control_plane.cluster()
    for obj in kube.list(RESOURCE_SLICES).items:  # the other test's pool
        kube.delete(RESOURCE_SLICES, obj["metadata"]["name"])
    resources = tmp_path / "resources.yaml"
    resources.write_text(RESOURCES)
    env = dict(os.environ, KUBECONFIG=str(control_plane.kubeconfig()))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    command = [sys.executable, "-c", "from fluence_core.cli import main; main()",
               "qpu-driver", "--once", "--resources", str(resources)]
    versions = []
    for _ in range(2):
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        [published] = kube.list(RESOURCE_SLICES).items
        versions.append((published["metadata"]["name"], published["spec"]["pool"]["generation"]))
    assert versions == [("fluence-dra-qpu-cluster-1-0", 1)] * 2


def test_the_pods_of_one_job_sharing_one_claim_hold_one_backend(
        control_plane: ApiServer, tmp_path: Path) -> None:
    """A gang whose pods all name the same claim: it is allocated once (one backend for the
    whole group) and reserved for each pod. (A shared hybrid Job's split gives the claim
    to the scout alone: docs/dra.md.)"""
    kube = control_plane.cluster(qps=1000, burst=1000)
    namespace = "qpu-shared"
    ensure_namespace(kube, namespace)
    if kube.get(DEVICE_CLASSES, names.QPU_DEVICE_CLASS) is None:
        for device_class in _shipped_device_classes():
            kube.create(DEVICE_CLASSES, device_class)
    if kube.get("nodes", "qa") is None:
        kube.create("nodes", make_node_dict("qa", 4, capacity=True, labels={"qpu-e2e": "yes"}))
    resources = tmp_path / "resources.yaml"
    resources.write_text("resources:\n  - type: qpu\n    name: solo\n"
                         "    attributes: {region: eu-north-1}\n  - type: qpu\n    name: spare\n"
                         "    attributes: {region: eu-north-1}\n")
    QpuDriver(SlicePublisher(kube), resources, 1.0).step()
    kube.create(RESOURCE_CLAIMS, make_resource_claim_dict("job-qpu", [make_device_request(
        "qpu", names.QPU_DEVICE_CLASS, 1,
        f'device.attributes["{FILE}"].region == "eu-north-1"')], namespace=None), namespace)
    kube.create("podgroups", make_pod_group_dict("job", 2, namespace), namespace)
    for index in range(2):
        kube.create("pods", make_pod_dict(
            f"job-{index}", "100m", namespace=None, scheduler="fluence", group="job",
            nodeSelector={"qpu-e2e": "yes"}, resourceClaims=claim_entries(qpu="job-qpu")),
            namespace)
    scheduler = Scheduler(kube, load_settings())
    scheduler.start()
    scheduler.schedule_once()
    bound = [(kube.get("pods", f"job-{i}", namespace) or {}).get("spec", {}).get("nodeName")
             for i in range(2)]
    assert all(bound), bound
    claim = kube.get(RESOURCE_CLAIMS, "job-qpu", namespace) or {}
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] in ([("cluster", "solo0")],
                                                           [("cluster", "spare0")])
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["job-0", "job-1"]


def test_a_backend_kube_scheduler_claimed_is_not_given_by_fluence_for_the_extended_resource(
        control_plane: ApiServer, tmp_path: Path) -> None:
    """kube-scheduler allocates the only backend to a claim; Fluence, asked for a QPU through
    the extended resource (its graph built from the driver's own file), gives it to no
    one, and still not after a restart; a second backend published is given at once, and
    then not by claim, by the same Fluence or a restarted one."""
    kube = control_plane.cluster(qps=1000, burst=1000)
    namespace = "qpu-mixed"
    ensure_namespace(kube, namespace)
    if kube.get(DEVICE_CLASSES, names.QPU_DEVICE_CLASS) is None:
        for device_class in _shipped_device_classes():
            kube.create(DEVICE_CLASSES, device_class)
    for node in ("qa", "qb"):
        if kube.get("nodes", node) is None:
            kube.create("nodes", make_node_dict(node, 4, capacity=True,
                                                labels={"qpu-e2e": "yes"}))
    one = "resources:\n  - type: qpu\n    name: mixed\n    attributes: {region: ap-south-1}\n"
    resources = tmp_path / "resources.yaml"
    resources.write_text(one)
    driver = QpuDriver(SlicePublisher(kube), resources, 1.0)
    driver.step()
    time.sleep(0.5)  # kube-scheduler's informers hear of the slice

    kube.create(RESOURCE_CLAIMS, make_resource_claim_dict("kube-mixed", [make_device_request(
        "qpu", names.QPU_DEVICE_CLASS)], namespace=None), namespace)
    kube.create("pods", make_pod_dict(
        "kube-mixed", "100m", namespace=None, scheduler="default-scheduler",
        nodeSelector={"qpu-e2e": "yes"}, resourceClaims=claim_entries(qpu="kube-mixed")),
        namespace)
    wait_for(lambda: (kube.get("pods", "kube-mixed", namespace) or {}).get("spec", {}).get(
        "nodeName"), "kube-scheduler to bind kube-mixed", 30)
    stored = kube.get(RESOURCE_CLAIMS, "kube-mixed", namespace) or {}
    assert [r["device"] for r in stored["status"]["allocation"]["devices"]["results"]] == [
        "mixed0"]

    qpu = names.extended_resource("qpu")
    kube.create("pods", make_pod_dict(
        "fluence-ext", "100m", namespace=None, extra={qpu: "1"}, limits={qpu: "1"},
        nodeSelector={"qpu-e2e": "yes"}), namespace)
    settings = load_settings(resources=resources)
    for attempt in ("first", "restarted"):
        scheduler = Scheduler(kube, settings)
        scheduler.start()
        scheduler.schedule_once()
        placed = kube.get("pods", "fluence-ext", namespace) or {}
        assert placed["spec"].get("nodeName") is None, f"{attempt}: given a claimed backend"
        print(f"\n  Fluence ({attempt}) on fluence-ext: "
              f"{(placed.get('metadata') or {}).get('annotations')}")

    resources.write_text(one + "  - type: qpu\n    name: spare\n")
    driver.step()
    scheduler = Scheduler(kube, load_settings(resources=resources))
    scheduler.start()
    scheduler.schedule_once()
    placed = kube.get("pods", "fluence-ext", namespace) or {}
    assert placed["spec"].get("nodeName") in ("qa", "qb")
    assert placed["metadata"]["annotations"][names.BACKEND_ANNOTATION] == "spare"

    # the other order: what Fluence gave for the extended resource it does not give by claim
    spare = f'device.attributes["{names.QPU_DRA_DRIVER}"].backend == "spare"'
    kube.create(RESOURCE_CLAIMS, make_resource_claim_dict("fluence-spare", [make_device_request(
        "qpu", names.QPU_DEVICE_CLASS, 1, spare)], namespace=None), namespace)
    kube.create("pods", make_pod_dict(
        "fluence-spare", "100m", namespace=None, nodeSelector={"qpu-e2e": "yes"},
        resourceClaims=claim_entries(qpu="fluence-spare")), namespace)
    for attempt in ("same", "restarted"):
        if attempt == "restarted":
            scheduler = Scheduler(kube, load_settings(resources=resources))
            scheduler.start()
        else:
            scheduler.pump(timeout=1)  # it hears of the new claim and pod
        scheduler.schedule_once()
        waiting = kube.get("pods", "fluence-spare", namespace) or {}
        claim = kube.get(RESOURCE_CLAIMS, "fluence-spare", namespace) or {}
        assert waiting["spec"].get("nodeName") is None, f"{attempt}: claimed a given backend"
        assert not (claim.get("status") or {}).get("allocation"), attempt
