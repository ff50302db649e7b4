"""The hybrid flow with the QPU asked for by ResourceClaim, on the in-memory cluster.

The Job of tests/hybrid/test_flow.py, but its pods name a claim of the QPU driver's
DeviceClass instead of the extended resource. The split recognises it; the scout keeps
the claim (its sidecar uses it too), the workers lose it and wait behind the gate,
holding nothing; the scheduler allocates the claim with the scout; the sidecar learns
the backend from the claim's CDI device (what the kubelet plugin prepares); at release
each worker is stamped with the backend the scout's claim holds and its env reads it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_core import names
from fluence_core.hybrid.claims import claimed_backend, qpu_claim_entries, published_key
from fluence_core.hybrid.reporter import LocalReporter
from fluence_core.hybrid.sidecar import Outcome, VirtualClock, sidecar_from_env
from fluence_core.kube.api import (
    DEVICE_CLASSES, PODGROUPS, PODS, RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
)
from fluence_core.kube.downward import container_env
from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.runtime.fake_provider import FakeQueueProvider, FakeTask
from fluence_core.runtime.provider import collect_providers
from fluence_core.scheduler.core import Scheduler
from fluence_core.testing import (
    indexed_job_pods, make_device_request, make_resource_claim_dict,
)
from fluence_core.webhook import build_service
from fluence_dra_qpu.driver import QpuDriver
from fluence_dra_qpu.kubelet import Preparer
from fluence_dra_qpu.protocol import dra_pb2
from fluence_dra_qpu.publisher import SlicePublisher
from tests.hybrid.case import SCRIPT, sidecar_settings_from
from tests.hybrid.test_flow import admit, by_name, env_sources, flow_world

pytestmark = pytest.mark.usefixtures("clean_env")

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "hybrid"
GATE = "example.org/hybrid-ready"
CLAIM = "vqe-qpu"
FAKE = f'device.attributes["{names.RESOURCE_DOMAIN}"].provider == "fake"'


def claim_job(job: dict[str, Any], entry: dict[str, str]) -> dict[str, Any]:
    """The example Job asking for its QPU through ``entry`` (a pod's resourceClaims entry)
    instead of the extended resource."""
    job = copy.deepcopy(job)
    spec = job["spec"]["template"]["spec"]
    resources = spec["containers"][0]["resources"]
    for section in ("requests", "limits"):
        resources[section].pop(names.extended_resource("qpu"), None)
    resources["claims"] = [{"name": entry["name"]}]
    spec["resourceClaims"] = [entry]
    return job


def qpu_driver(cluster: FakeCluster, resources: Path) -> None:
    """The DeviceClasses as deploy/qpu-driver.yaml ships them, and the driver's slices."""
    shipped = yaml.safe_load_all((REPO / "deploy" / "qpu-driver.yaml").read_text())
    for document in shipped:
        if document and document.get("kind") == "DeviceClass":
            cluster.create(DEVICE_CLASSES, document)
    QpuDriver(SlicePublisher(cluster), resources, 1.0).step()


def cdi_env(cluster: FakeCluster, resources: Path, claim: str, cdi: Path) -> dict[str, str]:
    """What the kubelet plugin's CDI spec for ``claim`` gives a container that uses it."""
    stored = cluster.get(RESOURCE_CLAIMS, claim, NAMESPACE)
    assert stored is not None
    answer = Preparer(cluster, resources, cdi).prepare(dra_pb2.Claim(
        namespace=NAMESPACE, name=claim, uid=stored["metadata"]["uid"]))
    assert answer.error == "", answer.error
    spec = json.loads((cdi / f"fluence-qpu-{stored['metadata']['uid']}.json").read_text())
    return dict(line.split("=", 1) for device in spec["devices"]
                for line in device["containerEdits"]["env"])


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    found = flow_world(tmp_path)
    qpu_driver(found["cluster"], found["resources"])
    return found


def test_a_job_asking_for_its_qpu_by_claim_gets_the_two_queue_flow(
        world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    settings, cluster = world["settings"], world["cluster"]
    cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(CLAIM, [make_device_request(
        "qpu", names.QPU_DEVICE_CLASS, 1, FAKE)], namespace=None), NAMESPACE)
    job = cluster.create("jobs", claim_job(world["job"], {"name": "qpu",
                                                          "resourceClaimName": CLAIM}), NAMESPACE)

    # -- the split: the scout keeps the claim, the workers lose it and wait -------------------
    service = build_service(settings, get_plugin_manager(settings), cluster)
    for pod in indexed_job_pods(job):
        stored = cluster.create(PODS, admit(service, pod), NAMESPACE)
        service.controller.pod_stored("ADDED", stored)
    scout = cluster.get(PODS, "vqe-0", NAMESPACE)
    assert scout["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_SCOUT
    assert scout["spec"]["resourceClaims"] == [{"name": "qpu", "resourceClaimName": CLAIM}]
    sidecar = by_name(scout, names.SIDECAR_CONTAINER)
    assert sidecar["resources"]["claims"] == [{"name": "qpu"}]
    assert names.ENV_BACKEND not in env_sources(sidecar)  # the claim's CDI device says it
    groups = {g["metadata"]["name"]: g["spec"]["schedulingPolicy"]["gang"]["minCount"]
              for g in cluster.list(PODGROUPS, NAMESPACE).items}
    assert groups == {"vqe-scout": 1, "vqe": 3}
    for i in (1, 2, 3):
        worker = cluster.get(PODS, f"vqe-{i}", NAMESPACE)
        assert worker["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_WORKER
        assert worker["spec"]["schedulingGates"] == [{"name": GATE}]
        assert not worker["spec"].get("resourceClaims")
        app = worker["spec"]["containers"][0]
        assert not app["resources"].get("claims")
        wiring = env_sources(app)
        assert wiring[names.ENV_BACKEND] == f"metadata.annotations['{names.BACKEND_ANNOTATION}']"
        assert wiring["FLUXION_DEVICE_ARN"] == (
            f"metadata.annotations['{names.attr_annotation('device_arn')}']")

    # -- the scheduler: the scout goes with the claim allocated; the workers hold nothing -----
    scheduler = Scheduler(cluster, settings)
    scheduler.start()

    def cycle() -> None:
        scheduler.pump()
        scheduler.schedule_once()
        scheduler.pump()

    cycle()
    scout = cluster.get(PODS, "vqe-0", NAMESPACE)
    assert scout["spec"].get("nodeName")
    claim = cluster.get(RESOURCE_CLAIMS, CLAIM, NAMESPACE)
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (names.QPU_DRA_DRIVER, "cluster")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["vqe-0"]
    assert all(cluster.get(PODS, f"vqe-{i}", NAMESPACE)["spec"].get("nodeName") is None
               for i in (1, 2, 3))
    assert claimed_backend(cluster, scout)[names.BACKEND_ANNOTATION] == "sim_qpu"
    # the claimed qpu is held in the graph too: its backend instance, whole (one accounting)
    [jobid] = scheduler.view.backends.holds.values()
    held = scheduler.matcher.allocations()[jobid]
    assert [v.path for v in held.virtual] == ["/cluster0/sim_qpu0"]

    # -- the sidecar: its env as injected, plus what the claim's CDI device sets -------------
    env = container_env(scout, names.SIDECAR_CONTAINER)
    from_claim = cdi_env(cluster, world["resources"], CLAIM, world["tmp"] / "cdi")
    assert from_claim[names.ENV_BACKEND] == "sim_qpu" and from_claim["FLUXION_PROVIDER"] == "fake"
    env.update(from_claim)
    runtime = world["tmp"] / "emptydir"
    runtime.mkdir()
    env[names.ENV_RUNTIME_DIR] = str(runtime)
    sidecar_settings = sidecar_settings_from(monkeypatch, env)
    clock = VirtualClock()
    fake = FakeQueueProvider(clock, {scout["metadata"]["uid"]: FakeTask(
        "fake-task/0001", SCRIPT, session="session-42")})
    real = collect_providers(get_plugin_manager(sidecar_settings))
    fluence = LocalReporter(cluster, NAMESPACE, "vqe-0", settings.hybrid.quantum_gate)
    runner = sidecar_from_env(sidecar_settings, fluence, [*real, fake], clock=clock)
    assert runner.provider is fake and runner.config.backend.name == "sim_qpu"
    gated: dict[float, bool] = {}

    def on_sleep(now: float) -> None:
        cycle()
        pods = [cluster.get(PODS, f"vqe-{i}", NAMESPACE) for i in (1, 2, 3)]
        gated[now] = all(p["spec"].get("schedulingGates") for p in pods)
        if gated[now]:
            assert not any(p["spec"].get("nodeName") for p in pods), "a gated worker holds a node"
        for p in pods:
            if p["spec"].get("nodeName") and p["status"].get("phase") == "Pending":
                cluster.patch_status(PODS, p["metadata"]["name"],
                                     {"status": {"phase": "Succeeded"}}, NAMESPACE)

    clock.on_sleep = on_sleep
    outcome = runner.run()
    assert outcome.outcome is Outcome.READY and sorted(outcome.ungated) == [
        "vqe-1", "vqe-2", "vqe-3"]
    assert gated[70] is True and gated[80] is False  # released at position 1, not before

    # -- each worker learned the backend the scout's claim holds -----------------------------
    for i in (1, 2, 3):
        worker = cluster.get(PODS, f"vqe-{i}", NAMESPACE)
        assert worker["spec"].get("nodeName"), f"vqe-{i} was not bound after the release"
        seen = container_env(worker, "app")
        assert (seen[names.ENV_BACKEND], seen["FLUXION_PROVIDER"], seen["FLUXION_REGION"],
                seen["FLUXION_DEVICE_ARN"]) == ("sim_qpu", "fake", "sim-1", "arn:fake:device/sim")
        assert (seen[names.ENV_SCOUT_JOB_ID], seen[names.ENV_SCOUT_SESSION]) == (
            "fake-task/0001", "session-42")
    assert outcome.workers_finished


def test_the_scout_alone_carries_a_template_claim(world: dict[str, Any]) -> None:
    settings, cluster = world["settings"], world["cluster"]
    cluster.create(RESOURCE_CLAIM_TEMPLATES, {"metadata": {"name": "qpu-template"}, "spec": {
        "spec": {"devices": {"requests": [make_device_request(
            "qpu", names.QPU_DEVICE_CLASS)]}}}}, NAMESPACE)
    job = cluster.create("jobs", claim_job(world["job"], {
        "name": "qpu", "resourceClaimTemplateName": "qpu-template"}), NAMESPACE)
    service = build_service(settings, get_plugin_manager(settings), cluster)
    pods = [admit(service, pod) for pod in indexed_job_pods(job)]
    assert pods[0]["spec"]["resourceClaims"] == [
        {"name": "qpu", "resourceClaimTemplateName": "qpu-template"}]
    assert by_name(pods[0], names.SIDECAR_CONTAINER)["resources"]["claims"] == [{"name": "qpu"}]
    for worker in pods[1:]:
        assert worker["spec"]["schedulingGates"] == [{"name": GATE}]
        assert not worker["spec"].get("resourceClaims")
        assert not worker["spec"]["containers"][0]["resources"].get("claims")


def _refused(service: Any, pod: dict[str, Any]) -> str:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "req", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "operation": "CREATE", "namespace": NAMESPACE, "object": pod}}
    response = service.review(json.dumps(review).encode()).body["response"]
    assert not response["allowed"], response
    return str(response["status"]["message"])


def test_a_shared_job_whose_claims_ask_for_no_qpu_is_refused_with_the_reason(
        world: dict[str, Any]) -> None:
    settings, cluster = world["settings"], world["cluster"]
    cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict("gpus", [make_device_request(
        "gpu", "gpu.example.com")], namespace=None), NAMESPACE)
    service = build_service(settings, get_plugin_manager(settings), cluster)
    gpu_job = claim_job(world["job"], {"name": "gpu", "resourceClaimName": "gpus"})
    gpu_job["metadata"]["uid"] = "uid-gpu"
    message = _refused(service, indexed_job_pods(gpu_job)[0])
    assert "none of spec.resourceClaims asks for one" in message
    assert names.QPU_DEVICE_CLASS in message
    missing = claim_job(world["job"], {"name": "qpu", "resourceClaimName": "absent"})
    missing["metadata"]["uid"] = "uid-missing"
    message = _refused(service, indexed_job_pods(missing)[1])
    assert f"ResourceClaim {NAMESPACE}/absent not found" in message
    assert "spec.resourceClaims['qpu']" in message


def test_which_claims_ask_for_a_qpu_and_the_backend_a_claim_holds(
        world: dict[str, Any]) -> None:
    cluster = world["cluster"]
    cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict("gpus", [make_device_request(
        "gpu", "gpu.example.com")], namespace=None), NAMESPACE)
    cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict("any-backend", [{
        "name": "b", "firstAvailable": [
            {"name": "gpu", "deviceClassName": "gpu.example.com"},
            {"name": "qpu", "deviceClassName": names.QPU_BACKENDS_CLASS}]}],
        namespace=None), NAMESPACE)
    pod = {"metadata": {"namespace": NAMESPACE}, "spec": {"resourceClaims": [
        {"name": "g", "resourceClaimName": "gpus"},
        {"name": "q", "resourceClaimName": "any-backend"}]}}
    assert qpu_claim_entries(pod, NAMESPACE, cluster) == ["q"]
    # a template's claim, found through the pod's status, allocated the driver's qpu device
    [qpu_device] = [d["name"] for s in cluster.list("resourceslices").items
                    for d in s["spec"]["devices"] if d["attributes"]["type"]["string"] == "qpu"]
    made = cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict("vqe-0-qpu-x1", [
        make_device_request("qpu", names.QPU_DEVICE_CLASS)], namespace=None), NAMESPACE)
    cluster.patch_status(RESOURCE_CLAIMS, made["metadata"]["name"], {"status": {"allocation": {
        "devices": {"results": [{"request": "qpu", "driver": names.QPU_DRA_DRIVER,
                                 "pool": "cluster", "device": qpu_device}]}}}}, NAMESPACE)
    scout = {"metadata": {"namespace": NAMESPACE},
             "spec": {"resourceClaims": [{"name": "qpu",
                                          "resourceClaimTemplateName": "qpu-template"}]},
             "status": {"resourceClaimStatuses": [{"name": "qpu",
                                                   "resourceClaimName": "vqe-0-qpu-x1"}]}}
    found = claimed_backend(cluster, scout)
    assert found[names.BACKEND_ANNOTATION] == "sim_qpu"
    assert found[names.attr_annotation(published_key("device-arn"))] == "arn:fake:device/sim"
    assert claimed_backend(cluster, {"metadata": {"namespace": NAMESPACE}, "spec": {}}) == {}
