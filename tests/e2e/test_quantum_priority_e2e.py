"""Issue 39: priority and protection are the cluster's to grant, on a real API server.

Found as a tenant: PriorityClass ``fluence-quantum-classical`` (value 1000) was usable from
any namespace, and any pod asking for one qubit was marked ``protected`` (never a victim)
with ``promised-cores``, hybrid group or not. Here deploy/quantum-priority-policy.yaml is in
force (bound to this test's namespace only: the session's other tests create pods as the
admin) and Fluence's webhook serves the namespace, its admission plugin included:

* a tenant's pod naming the class is refused, and so is one that also writes the worker's
  role label, gate and a seal of its own; the workers the webhook splits from the tenant's
  shared Job get the class, the seal and the marks;
* a worker keeps its seal when a later webhook (a mesh's injector) makes the API server
  call Fluence's again;
* only Fluence lifts the gate from a worker in the class;
* a lone pod asking for a qubit is admitted unmarked, and a pod that is not Fluence's
  cannot arrive marked.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_core import names
from fluence_core.kube.api import MUTATING_WEBHOOKS, Resource
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError, Conflict
from fluence_core.kube.manifests import read_objects
from fluence_core.settings import load_settings
from fluence_core.testing import indexed_job_pods, make_pod_dict
from fluence_core.testing_apiserver import ApiServer, wait_for, webhook_beside, webhook_entry
from fluence_core.webhook.transport import tls
from fluence_core.webhook.main import Webhook
from fluence_core.webhook.transport.routes import Reply
from fluence_core.webhook.transport.server import WebhookServer, server_context
from tests.e2e.accounts import account_cluster, bind_account, tenant_role

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
POLICY_FILE = REPO / "deploy" / "quantum-priority-policy.yaml"
POLICIES = Resource("validatingadmissionpolicies", "ValidatingAdmissionPolicy",
                    group="admissionregistration.k8s.io", namespaced=False)
BINDINGS = Resource("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
                    group="admissionregistration.k8s.io", namespaced=False)
CLASS = names.QUANTUM_PRIORITY_CLASS
QPU = names.extended_resource("qpu")
REFUSED_CLASS = f"PriorityClass {CLASS} is Fluence's to grant"
SplitJob = Callable[[], dict[int, dict[str, Any]]]
"""Submits the tenant's shared hybrid Job; its pods by completion index (:func:`split_job`)."""


def _pod(name: str, *, scheduler: str = names.SCHEDULER_NAME, qpu: bool = False,
         annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
         **spec: Any) -> dict[str, Any]:
    """A pod no node can take (no scheduler runs here): only admission acts on it."""
    asked = {QPU: "1"} if qpu else None
    return make_pod_dict(name, "1", extra=asked, limits=asked, namespace=None,
                         scheduler=scheduler, annotations=annotations, labels=labels or {},
                         nodeSelector={"no-such-node": "x"}, **spec)


def _priority_class(kube: KubeCluster) -> dict[str, Any]:
    """deploy/fluence.yaml's PriorityClass, created once for the session's server."""
    (made,) = read_objects(REPO / "deploy" / "fluence.yaml", kind="PriorityClass")
    try:
        kube.create("priorityclasses", made)
    except Conflict:
        pass
    return made


@pytest.fixture
def policy(kube: KubeCluster, kube_namespace: str) -> Iterator[None]:
    """The shipped policy and binding, the binding narrowed to this test's namespace, in
    force (a probe pod in the class refused, on dry run) before the test runs."""
    _priority_class(kube)
    documents = [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d]
    by_kind = {d["kind"]: d for d in documents}
    body = copy.deepcopy(by_kind["ValidatingAdmissionPolicy"])
    binding = copy.deepcopy(by_kind["ValidatingAdmissionPolicyBinding"])
    body["metadata"]["name"] += f"-{kube_namespace}"
    binding["metadata"]["name"] += f"-{kube_namespace}"
    binding["spec"]["policyName"] = body["metadata"]["name"]
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": kube_namespace}}}
    kube.create(POLICIES, body)
    kube.create(BINDINGS, binding)
    probe = _pod("probe", scheduler="default-scheduler", priorityClassName=CLASS)
    deadline = time.monotonic() + 30
    while True:  # the API server loads policies from its own informer, a moment later
        try:
            kube.create("pods", probe, kube_namespace, dry_run=True)
        except ApiError as refused:
            if REFUSED_CLASS in str(refused):
                break
            raise
        assert time.monotonic() < deadline, "the quantum priority policy never took effect"
        time.sleep(0.5)
    yield
    kube.delete(BINDINGS, binding["metadata"]["name"])
    kube.delete(POLICIES, body["metadata"]["name"])


@pytest.fixture
def tenant(apiserver: ApiServer, kube: KubeCluster, kube_namespace: str) -> KubeCluster:
    """A ServiceAccount of the namespace that may create and edit its pods and Jobs."""
    role = tenant_role(kube, kube_namespace)
    bind_account(kube, kube_namespace, "tenant", role, kube_namespace, kind="Role")
    return account_cluster(apiserver, kube_namespace, "tenant", kube_namespace)


@pytest.fixture
def webhook(kube: KubeCluster, kube_namespace: str, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Webhook]:
    """Fluence's webhook for the namespace, as deployed: its match conditions, every
    installed plugin (admission's marks included). Admission control's budget is off: it
    would count the session's other nodes, and it is not what these tests judge."""
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    settings = load_settings(webhook_config=f"fluence-priority-{kube_namespace}")
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=kube_namespace,
                        resources=("pods", "jobs"), match_conditions=True) as served:
        yield served


@pytest.fixture
def split_job(kube: KubeCluster, tenant: KubeCluster, apiserver: ApiServer,
              kube_namespace: str) -> Iterator[SplitJob]:
    """Submits the tenant's shared hybrid Job of 4 (examples/) and returns its pods as
    stored, by completion index: made by the job controller when one runs, else by the
    tenant as it would. Afterwards the Job and its pods go: their promised cores would
    weigh on the admission budget of every later test on this shared server."""

    def submit() -> dict[int, dict[str, Any]]:
        (job,) = read_objects(REPO / "examples" / "quantum-shared-job.yaml", kind="Job")
        job["spec"]["template"]["spec"]["nodeSelector"] = {"no-such-node": "x"}
        job = tenant.create("jobs", job, kube_namespace)
        if apiserver.controller_manager:
            wait_for(lambda: len(kube.list("pods", kube_namespace).items) == 4,
                     "the job controller's 4 pods")
        else:
            for made in indexed_job_pods(job):
                tenant.create("pods", made, kube_namespace)
        return {int(p["metadata"]["labels"][names.JOB_COMPLETION_INDEX]): p
                for p in kube.list("pods", kube_namespace).items}

    yield submit
    kube.delete("jobs", "vqe", kube_namespace, propagation="Orphan")
    for pod in kube.list("pods", kube_namespace).items:
        kube.delete("pods", pod["metadata"]["name"], kube_namespace, grace_period_seconds=0)


class MeshEndpoint:
    """A service mesh's injector, as far as admission sees one: every pod gets a label. Called
    after Fluence's webhook, it makes the API server call Fluence's again (IfNeeded)."""

    def limit(self, path: str) -> int | None:
        return 4 * 1024 * 1024

    def post(self, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        request = json.loads(body)["request"]
        labels = request["object"]["metadata"].get("labels") or {}
        patch = [] if MESH_LABEL in labels else [
            {"op": "add", "path": "/metadata/labels", "value": {**labels, MESH_LABEL: "on"}}]
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        if patch:
            response.update(patchType="JSONPatch",
                            patch=base64.b64encode(json.dumps(patch).encode()).decode())
        return Reply(200, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response})

    def error(self, path: str, status: int, message: str) -> dict[str, Any]:
        return {"error": message, "code": status}


MESH_LABEL = "mesh.example.org/injected"


@pytest.fixture
def mesh(kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> Iterator[None]:
    """The mesh's webhook for the namespace, named to run after Fluence's (the API server
    calls configurations in name order), in force before the test runs."""
    cert = tls.generate(["localhost"], tmp_path / "mesh-tls", ip_addresses=["127.0.0.1"])
    server = WebhookServer(("127.0.0.1", 0), MeshEndpoint(),
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    threading.Thread(target=server.serve_forever, daemon=True, name="e2e-mesh").start()
    entry = webhook_entry("pods", f"https://127.0.0.1:{server.port}/inject", kube_namespace,
                          reinvocation="Never", ca_pem=cert.ca_pem)
    entry["name"] = "inject.mesh.example.org"
    name = f"zz-mesh-{kube_namespace}"
    kube.create(MUTATING_WEBHOOKS, {"metadata": {"name": name}, "webhooks": [entry]})
    probe = _pod("mesh-probe", scheduler="default-scheduler")
    wait_for(lambda: MESH_LABEL in kube.create("pods", probe, kube_namespace,
                                               dry_run=True)["metadata"].get("labels", {}),
             "the mesh webhook to be called")
    yield
    kube.delete(MUTATING_WEBHOOKS, name)
    server.shutdown()
    server.server_close()


def test_a_tenants_pod_naming_the_quantum_class_is_refused(
        policy: None, webhook: Webhook, tenant: KubeCluster, kube_namespace: str) -> None:
    for scheduler in (names.SCHEDULER_NAME, "default-scheduler"):
        with pytest.raises(ApiError) as refused:
            tenant.create("pods", _pod("buyer", scheduler=scheduler, priorityClassName=CLASS),
                          kube_namespace)
        assert REFUSED_CLASS in str(refused.value), scheduler


def test_a_tenant_writing_the_workers_label_gate_and_seal_is_refused(
        policy: None, webhook: Webhook, tenant: KubeCluster, kube_namespace: str) -> None:
    forged = {"labels": {names.GROUP_LABEL: "g", names.ROLE_LABEL: names.ROLE_WORKER},
              "annotations": {names.SPLIT_SEAL_ANNOTATION: "0" * 64,
                              names.COORDINATION_ANNOTATION: names.COORDINATION_SHARED}}
    with pytest.raises(ApiError) as refused:  # the webhook strips the seal it did not make
        tenant.create("pods", _pod("forger", priorityClassName=CLASS,
                                   schedulingGates=[{"name": names.QUANTUM_GATE}], **forged),
                      kube_namespace)
    assert REFUSED_CLASS in str(refused.value)
    with pytest.raises(ApiError) as refused:  # a pod the webhook never sees keeps it
        tenant.create("pods", _pod("bypass", scheduler="default-scheduler",
                                   schedulingGates=[{"name": names.QUANTUM_GATE}], **forged),
                      kube_namespace)
    assert f"annotation {names.SPLIT_SEAL_ANNOTATION} is written by Fluence's webhook" in str(
        refused.value)


def test_the_workers_the_webhook_splits_get_the_class_the_seal_and_the_marks(
        policy: None, webhook: Webhook, split_job: SplitJob, kube: KubeCluster) -> None:
    made = split_job()
    value = _priority_class(kube)["value"]
    for index in (1, 2, 3):
        worker = made[index]
        assert worker["spec"]["priorityClassName"] == CLASS
        assert worker["spec"]["priority"] == value
        notes = worker["metadata"]["annotations"]
        assert notes[names.SPLIT_SEAL_ANNOTATION]
        assert notes[names.PROTECTED_ANNOTATION] == "true"
        assert notes[names.PROMISED_CORES_ANNOTATION] == "4"  # the group: 4 pods x 1 core
    scout = made[0]
    assert scout["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_SCOUT
    assert scout["metadata"]["annotations"][names.PROTECTED_ANNOTATION] == "true"
    assert "priorityClassName" not in scout["spec"]


def test_a_worker_keeps_its_seal_when_a_later_webhook_makes_fluences_run_again(
        policy: None, webhook: Webhook, mesh: None, split_job: SplitJob) -> None:
    made = split_job()
    assert all(p["metadata"]["labels"][MESH_LABEL] == "on" for p in made.values())
    for index in (1, 2, 3):
        assert made[index]["spec"]["priorityClassName"] == CLASS
        assert made[index]["metadata"]["annotations"][names.PROTECTED_ANNOTATION] == "true"


def test_only_fluence_lifts_the_quantum_gate_from_a_worker(
        policy: None, webhook: Webhook, split_job: SplitJob, tenant: KubeCluster,
        kube: KubeCluster, apiserver: ApiServer, kube_namespace: str) -> None:
    worker = split_job()[1]["metadata"]["name"]
    with pytest.raises(ApiError) as refused:
        tenant.patch("pods", worker, {"spec": {"schedulingGates": None}}, kube_namespace)
    assert f"only Fluence lifts scheduling gate {names.QUANTUM_GATE}" in str(refused.value)
    try:
        kube.create("namespaces", {"metadata": {"name": names.FLUENCE_NAMESPACE}})
    except Conflict:
        pass
    bind_account(kube, names.FLUENCE_NAMESPACE, "fluence-webhook", tenant_role(
        kube, kube_namespace, "fluence-webhook"), kube_namespace, kind="Role")
    fluence = account_cluster(apiserver, names.FLUENCE_NAMESPACE, "fluence-webhook",
                              kube_namespace)
    lifted = fluence.patch("pods", worker, {"spec": {"schedulingGates": None}}, kube_namespace)
    assert not lifted["spec"].get("schedulingGates")


def test_a_lone_pod_asking_for_a_qubit_is_not_protected(
        policy: None, webhook: Webhook, tenant: KubeCluster, kube_namespace: str) -> None:
    stored = tenant.create("pods", _pod("lone", qpu=True), kube_namespace)
    notes = stored["metadata"].get("annotations") or {}
    assert names.PROTECTED_ANNOTATION not in notes
    assert names.PROMISED_CORES_ANNOTATION not in notes


def test_a_pod_the_webhook_never_sees_cannot_arrive_protected(
        policy: None, webhook: Webhook, tenant: KubeCluster, kube_namespace: str) -> None:
    with pytest.raises(ApiError) as refused:
        tenant.create("pods", _pod("armoured", scheduler="default-scheduler",
                                   annotations={names.PROTECTED_ANNOTATION: "true"}),
                      kube_namespace)
    assert f"only Fluence marks a pod {names.PROTECTED_ANNOTATION}" in str(refused.value)
