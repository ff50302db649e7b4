"""End to end: a real kube-apiserver sends Jobs and JobSets to the webhook over HTTPS.

Skipped without ``KUBEBUILDER_ASSETS``. The apiserver is this module's own; the
webhook runs in-process on 127.0.0.1 with every installed plugin (as ``fluence
webhook`` would), and a minimal JobSet CRD is installed so JobSets can be made.
With ``kube-controller-manager`` in the assets the garbage collector runs too,
and deleting the Job is seen to delete its ConfigMap.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from fluence_flux.handler import INIT_CONTAINER
from flux_helpers import job, jobset

from fluence_core.api import ApiError, Resource, load_settings, names
from fluence_core.testing import (
    AdmissionEndpoint,
    BackgroundWriter,
    WebhookServer,
    build_service,
    find_assets,
    get_plugin_manager,
    server_context,
    start_apiserver,
    tls,
    watched_for,
)

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[3]
NAMESPACE = "flux"
CRDS = Resource("customresourcedefinitions", "CustomResourceDefinition",
                group="apiextensions.k8s.io", namespaced=False)

JOBSET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {
        "group": "jobset.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "plural": "jobsets",
            "singular": "jobset",
            "kind": "JobSet",
            "listKind": "JobSetList",
        },
        "versions": [
            {
                "name": "v1alpha2",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


SHIPPED_ENTRIES = ("pods.fluence.flux-framework.org", "jobs.fluence.flux-framework.org",
                   "workloads.fluence.flux-framework.org")
"""Pods (the gang handler), grouped Jobs (job-group) and Flux workloads, as deploy/ ships them."""


def shipped_entry(name: str = "workloads.fluence.flux-framework.org") -> dict:
    for doc in yaml.safe_load_all((REPO / "deploy" / "webhook.yaml").read_text()):
        if doc and doc.get("kind") == "MutatingWebhookConfiguration":
            return next(w for w in doc["webhooks"] if w["name"] == name)
    raise AssertionError("deploy/webhook.yaml has no MutatingWebhookConfiguration")


def until(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("flux-e2e")
    with start_apiserver(assets, work / "apiserver") as server:
        kube = server.cluster(qps=1000, burst=1000)
        kube.create("namespaces", {"metadata": {"name": NAMESPACE}})
        kube.create(CRDS, JOBSET_CRD)
        established = until(lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in ((kube.get(CRDS, "jobsets.jobset.x-k8s.io") or {}).get("status") or {}).get(
                "conditions") or []))
        assert established, "the JobSet CRD never became established"
        settings = load_settings(webhook_config="fluence-flux-e2e")
        cert = tls.generate(["localhost"], work / "tls", ip_addresses=["127.0.0.1"])
        # As fluence webhook: admission only answers; the controller's informers make the
        # PodGroups and the Flux objects from what the API server stored.
        service = build_service(settings, get_plugin_manager(settings), kube,
                                writer=BackgroundWriter(), watched=watched_for(kube))
        informers = service.controller.informers()
        httpd = WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(service),
                              ssl_context=server_context(str(cert.cert_file), str(cert.key_file)),
                              loops=informers)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        for informer in informers:
            assert informer.wait_synced(30), "the webhook's informers never synced"
        # The entries of deploy/webhook.yaml as shipped (rules, matchConditions), pointed here.
        entries = []
        for name in SHIPPED_ENTRIES:
            entry = copy.deepcopy(shipped_entry(name))
            entry["clientConfig"] = {"url": f"https://127.0.0.1:{httpd.port}/mutate"}
            entry["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
            entries.append(entry)
        kube.create("mutatingwebhookconfigurations", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "fluence-flux-e2e"}, "webhooks": entries})
        tls.patch_ca_bundle(kube, "fluence-flux-e2e", cert.ca_pem)
        yield server, kube, assets
        httpd.shutdown()
        httpd.server_close()
        service.writer.close()
        kube.close()


def kubectl(
    server, assets, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    binary = assets / "kubectl" if (assets / "kubectl").exists() else shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not in KUBEBUILDER_ASSETS nor on PATH")
    return subprocess.run(
        [str(binary), f"--kubeconfig={server.kubeconfig()}", "-n", NAMESPACE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def here(obj):
    obj["metadata"]["namespace"] = NAMESPACE
    return obj


def owners(kube, kind: str, name: str):
    stored = kube.get(kind, name, NAMESPACE) or {}
    return (stored.get("metadata") or {}).get("ownerReferences")


def test_the_lammps_example_is_stored_rewritten_with_its_service_and_owned_configmap(env):
    server, kube, assets = env
    done = kubectl(server, assets, "apply", "-f", str(REPO / "examples" / "flux-lammps-job.yaml"))
    assert done.returncode == 0, done.stderr
    stored = kube.get("jobs", "flux-lammps", NAMESPACE)
    spec = stored["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["initContainers"]] == [INIT_CONTAINER]
    app = spec["containers"][0]
    assert app["image"] == "ghcr.io/converged-computing/metric-lammps:ubuntu2204"
    assert app["command"] == ["/bin/bash", "/fluence/flux/entrypoint.sh"]
    assert app["args"][:2] == ["lmp", "-v"]
    assert spec["subdomain"] == "flux-lammps"
    assert {v["name"] for v in spec["volumes"]} == {"flux-view", "flux-scripts", "flux-shm"}
    svc = until(lambda: kube.get("services", "flux-lammps", NAMESPACE))  # made once stored
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"batch.kubernetes.io/job-name": "flux-lammps"}
    want = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "flux-lammps",
            "uid": stored["metadata"]["uid"],
        }
    ]
    for kind, name in (("configmaps", "flux-lammps-flux"), ("secrets", "flux-lammps-flux-curve"),
                       ("services", "flux-lammps")):
        assert until(lambda k=kind, n=name: owners(kube, k, n) == want), (
            kind,
            owners(kube, kind, name),
        )
    data = kube.get("configmaps", "flux-lammps-flux", NAMESPACE)["data"]
    assert "nodes=4" in data["entrypoint.sh"] and "tasks_per_node=2" in data["entrypoint.sh"]
    assert 'host = "flux-lammps-[0-3]"' in data["init.sh"]
    cert = base64.b64decode(
        kube.get("secrets", "flux-lammps-flux-curve", NAMESPACE)["data"]["curve.cert"]
    )
    assert b"secret-key" in cert
    if server.controller_manager:  # the garbage collector follows the owner reference
        done = kubectl(server, assets, "delete", "job", "flux-lammps", "--cascade=background")
        assert done.returncode == 0, done.stderr
        assert until(lambda: kube.get("configmaps", "flux-lammps-flux", NAMESPACE) is None, 60)


def test_a_job_flux_cannot_run_in_is_refused_by_the_api_server(env):
    server, kube, assets = env
    with pytest.raises(ApiError) as refused:
        kube.create("jobs", here(job("bad", parallelism=2)), NAMESPACE)
    assert "parallelism 2 but completions 4" in str(refused.value)
    assert kube.get("jobs", "bad", NAMESPACE) is None
    assert kube.get("configmaps", "bad-flux", NAMESPACE) is None


def test_a_server_dry_run_is_rewritten_but_creates_no_configmap(env):
    server, kube, assets = env
    done = kubectl(server, assets, "create", "--dry-run=server", "-o", "json", "-f", "-",
                   stdin=json.dumps(here(job("dry"))))
    assert done.returncode == 0, done.stderr
    assert (
        json.loads(done.stdout)["spec"]["template"]["spec"]["initContainers"][0]["name"]
        == INIT_CONTAINER
    )
    assert kube.get("configmaps", "dry-flux", NAMESPACE) is None


def test_a_jobset_is_rewritten_and_its_configmap_owned(env):
    server, kube, assets = env
    jobsets = Resource("jobsets", "JobSet", group="jobset.x-k8s.io", version="v1alpha2")
    stored = kube.create(
        jobsets,
        here(jobset("train", nodes=3, annotations={names.FLUX_ANNOTATION: "true"})),
        NAMESPACE,
    )
    assert stored["spec"]["network"] == {"enableDNSHostnames": True}
    pod = stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["name"] == INIT_CONTAINER
    assert pod["containers"][0]["args"] == ["python3", "train.py"]
    want = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
             "uid": stored["metadata"]["uid"]}]
    assert until(lambda: owners(kube, "configmaps", "train-flux") == want)
    assert (
        'host = "train-node-0-[0-2]"'
        in kube.get("configmaps", "train-flux", NAMESPACE)["data"]["init.sh"]
    )
    assert kube.get("services", "train", NAMESPACE) is None  # the JobSet controller's to make


def test_a_job_that_does_not_ask_for_flux_is_not_sent_to_the_webhook(env):
    server, kube, assets = env
    stored = kube.create("jobs", here(job("plain", flux=False)), NAMESPACE)
    assert "initContainers" not in stored["spec"]["template"]["spec"]
    assert kube.get("configmaps", "plain-flux", NAMESPACE) is None


# -- Kubeflow Trainer ------------------------------------------------------------------------

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINJOBS = Resource("trainjobs", "TrainJob", group="trainer.kubeflow.org", version="v1alpha1")
CLUSTER_RUNTIMES = Resource("clustertrainingruntimes", "ClusterTrainingRuntime",
                            group="trainer.kubeflow.org", version="v1alpha1", namespaced=False)
JOBSETS = Resource("jobsets", "JobSet", group="jobset.x-k8s.io", version="v1alpha2")


def _crd(kind: str, plural: str, scope: str, spec: dict) -> dict:
    """A Trainer CRD whose schema holds only the fields Fluence reads (the rest is pruned)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.trainer.kubeflow.org"},
        "spec": {"group": "trainer.kubeflow.org", "scope": scope,
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                           "listKind": f"{kind}List"},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": spec}}}}}]},
    }


COUNT = {"type": "integer"}
NUM_PROC = {"x-kubernetes-int-or-string": True}
ML_POLICY = {"mlPolicy": {"type": "object", "properties": {
    "numNodes": COUNT,
    "flux": {"type": "object", "properties": {"numProcPerNode": COUNT}},
    "torch": {"type": "object", "properties": {"numProcPerNode": NUM_PROC}}}}}
TRAINER_CRDS = [
    _crd("TrainJob", "trainjobs", "Namespaced", {
        "runtimeRef": {"type": "object", "properties": {
            "name": {"type": "string"}, "kind": {"type": "string"},
            "apiGroup": {"type": "string"}}},
        "trainer": {"type": "object", "properties": {
            "numNodes": COUNT, "numProcPerNode": NUM_PROC,
            "command": {"type": "array", "items": {"type": "string"}}}}}),
    _crd("TrainingRuntime", "trainingruntimes", "Namespaced", ML_POLICY),
    _crd("ClusterTrainingRuntime", "clustertrainingruntimes", "Cluster", ML_POLICY),
]


TRAINING_RUNTIMES = Resource("trainingruntimes", "TrainingRuntime", group="trainer.kubeflow.org",
                             version="v1alpha1")


def serves(kube, resource: Resource) -> bool:
    try:
        kube.list(resource, NAMESPACE if resource.namespaced else None)
        return True
    except ApiError:
        return False


def trainer_installed(kube, wanted: bool) -> None:
    """Make the Trainer CRDs present (established and served) or absent."""
    for crd in TRAINER_CRDS:
        name = crd["metadata"]["name"]
        if wanted and kube.get(CRDS, name) is None:
            kube.create(CRDS, crd)
        elif not wanted and kube.get(CRDS, name) is not None:
            kube.delete(CRDS, name)
    kinds = (TRAINJOBS, TRAINING_RUNTIMES, CLUSTER_RUNTIMES)
    assert until(lambda: all(serves(kube, kind) == wanted for kind in kinds), 60), \
        f"Trainer CRDs present: {not wanted}"


def trainer_jobset(name: str, owner: dict) -> dict:
    """The JobSet Trainer makes for a TrainJob: an initializer and the trainer step, owned."""
    init = {"name": "dataset-initializer", "replicas": 1, "template": {"spec": {"template": {
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "d", "image": "busybox", "command": ["true"]}]}}}}}
    step = {"name": "node", "replicas": 1, "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "node", "image": "busybox", "command": ["python3", "train.py"]}]}}}}}
    body = jobset(name, replicated=[init, step])
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": TRAINER_API, "kind": "TrainJob", "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    return here(body)


def train_job(kube, name: str, runtime: str, trainer: dict | None = None) -> dict:
    return kube.create(TRAINJOBS, here({
        "apiVersion": TRAINER_API, "kind": "TrainJob", "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime",
                                "apiGroup": "trainer.kubeflow.org"},
                 "trainer": trainer or {}}}), NAMESPACE)


def test_without_the_trainer_crds_a_trainjob_jobset_is_stored_unchanged(env):
    server, kube, assets = env
    trainer_installed(kube, False)
    ghost = {"metadata": {"name": "tj-ghost", "uid": "5b0d3c1e-0000-4000-8000-000000000000"}}
    sent = trainer_jobset("ghost", ghost)
    stored = kube.create(JOBSETS, copy.deepcopy(sent), NAMESPACE)
    assert stored["spec"]["replicatedJobs"] == sent["spec"]["replicatedJobs"]
    assert "network" not in stored["spec"]
    assert kube.get("configmaps", "ghost-flux", NAMESPACE) is None


def test_a_trainjob_whose_runtime_sets_ml_policy_flux_has_its_jobset_rewritten(env):
    server, kube, assets = env
    trainer_installed(kube, True)
    kube.create(CLUSTER_RUNTIMES, {
        "apiVersion": TRAINER_API, "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "flux-runtime"},
        "spec": {"mlPolicy": {"numNodes": 3, "flux": {"numProcPerNode": 2}}}})
    owner = train_job(kube, "tj", "flux-runtime")
    stored = kube.create(JOBSETS, trainer_jobset("tj", owner), NAMESPACE)
    initializer, step = stored["spec"]["replicatedJobs"]
    assert "initContainers" not in initializer["template"]["spec"]["template"]["spec"]
    job_spec = step["template"]["spec"]
    print("stored trainer step:", json.dumps({k: job_spec[k] for k in (
        "completionMode", "completions", "parallelism")}),
          json.dumps(job_spec["template"]["metadata"]),
          "schedulerName:", job_spec["template"]["spec"]["schedulerName"],
          "initContainers:", [c["name"] for c in job_spec["template"]["spec"]["initContainers"]])
    assert (job_spec["completionMode"], job_spec["completions"], job_spec["parallelism"]) == (
        "Indexed", 3, 3)
    pod = job_spec["template"]
    assert pod["spec"]["initContainers"][0]["name"] == INIT_CONTAINER
    assert pod["spec"]["containers"][0]["args"] == ["python3", "train.py"]
    assert pod["spec"]["schedulerName"] == names.SCHEDULER_NAME
    assert pod["metadata"]["labels"][names.GROUP_LABEL] == "tj"
    assert pod["metadata"]["annotations"][names.GROUP_SIZE_ANNOTATION] == "3"
    assert stored["spec"]["network"] == {"enableDNSHostnames": True}
    script = until(lambda: kube.get("configmaps", "tj-flux", NAMESPACE))["data"]["entrypoint.sh"]
    assert "nodes=3" in script and "tasks_per_node=2" in script
    init = kube.get("configmaps", "tj-flux", NAMESPACE)["data"]["init.sh"]
    assert 'host = "tj-node-0-[0-2]"' in init
    if not server.controller_manager:
        return
    # The Job the JobSet controller makes from the step (no JobSet controller runs here): the
    # job-group and gang handlers make its three pods one PodGroup of three.
    child = {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {"name": "tj-node-0", "labels": {"jobset.sigs.k8s.io/jobset-name": "tj"}},
             "spec": copy.deepcopy(job_spec)}
    kube.create("jobs", here(child), NAMESPACE)

    def pods():
        selector = "batch.kubernetes.io/job-name=tj-node-0"
        return kube.list("pods", NAMESPACE, label_selector=selector).items

    assert until(lambda: len(pods()) == 3, 60)
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods()} == {"tj"}
    # The webhook's controller makes the PodGroup from the stored Job, a moment after it.
    assert until(lambda: kube.get("podgroups", "tj", NAMESPACE) is not None, 30)
    group = kube.get("podgroups", "tj", NAMESPACE)
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3


def test_a_trainjob_with_a_torch_runtime_is_left_alone(env):
    server, kube, assets = env
    trainer_installed(kube, True)
    kube.create(CLUSTER_RUNTIMES, {
        "apiVersion": TRAINER_API, "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-runtime"},
        "spec": {"mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": "auto"}}}})
    owner = train_job(kube, "torch-tj", "torch-runtime")
    sent = trainer_jobset("torch-tj", owner)
    stored = kube.create(JOBSETS, copy.deepcopy(sent), NAMESPACE)
    assert stored["spec"]["replicatedJobs"] == sent["spec"]["replicatedJobs"]
    assert kube.get("configmaps", "torch-tj-flux", NAMESPACE) is None


# -- the Flux ranks are one gang -------------------------------------------------------------

def fluence_up(server, logs: Path) -> subprocess.Popen:
    """``fluence up`` (the installed command) against this API server."""
    command = Path(sys.executable).parent / "fluence"
    if not command.exists():
        pytest.skip(f"no fluence command beside {sys.executable}")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environ = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    environ.update({"KUBECONFIG": str(server.kubeconfig()), "FLUENCE_LEASE_NAMESPACE": NAMESPACE,
                    "POD_NAME": "fluence-e2e", "FLUENCE_METRICS_PORT": str(port)})
    return subprocess.Popen([str(command), "up"], env=environ, stdout=subprocess.DEVNULL,
                            stderr=open(logs, "wb"))


def gang_node(kube, name: str) -> None:
    kube.create("nodes", {"metadata": {"name": name, "labels": {"fluence-flux-e2e": "gang"}},
                          "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                                     "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}})


def diagnose(kube, tmp_path: Path) -> str:
    """What the Job, its pods and the scheduler's log say, for a failed wait."""
    stored = kube.get("jobs", "ranks", NAMESPACE) or {}
    groups = [g["metadata"]["name"] for g in kube.list("podgroups", NAMESPACE).items]
    template = json.dumps((stored.get("spec") or {}).get("template"))[:1500]
    lines = [f"job status: {json.dumps(stored.get('status'))}", f"job pod template: {template}",
             f"podgroups: {groups}"]
    for found in kube.list("pods", NAMESPACE).items:
        lines.append(f"pod {found['metadata']['name']}: node {found['spec'].get('nodeName')} "
                     f"scheduler {found['spec'].get('schedulerName')} "
                     f"group {found['spec'].get('schedulingGroup')} "
                     f"labels {found['metadata'].get('labels')} "
                     f"conditions {json.dumps((found.get('status') or {}).get('conditions'))}")
    events = kube.list("events", NAMESPACE).items
    lines += [f"event {e.get('reason')}: {e.get('message')}" for e in events[-15:]]
    return "\n".join(lines) + "\n" + (tmp_path / "fluence-up.log").read_text()[-3000:]


def test_the_brokers_of_a_flux_job_are_placed_whole_or_not_at_all(env, tmp_path):
    server, kube, assets = env
    if not server.controller_manager:
        pytest.skip(
            "no kube-controller-manager in KUBEBUILDER_ASSETS: nothing makes the Job's pods"
        )
    gang_node(kube, "gang-a")
    gang_node(kube, "gang-b")
    scheduler = fluence_up(server, tmp_path / "fluence-up.log")
    try:
        body = here(job("ranks", nodes=3))
        pod = body["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"fluence-flux-e2e": "gang"}
        pod["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
        kube.create("jobs", body, NAMESPACE)

        def pods():
            return kube.list(
                "pods", NAMESPACE, label_selector="batch.kubernetes.io/job-name=ranks"
            ).items

        def waiting(pod) -> bool:
            return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                       for c in (pod.get("status") or {}).get("conditions") or [])

        # Two nodes of two CPUs hold two of the three brokers: Fluence binds none of them.
        assert until(lambda: len(pods()) == 3 and all(waiting(p) for p in pods()), 90), \
            diagnose(kube, tmp_path)
        group = until(lambda: kube.get("podgroups", "ranks", NAMESPACE))
        print("PodGroup ranks:", json.dumps(group["spec"]))
        assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
        assert [p["spec"].get("nodeName") for p in pods()] == [None] * 3
        assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods()} == {"ranks"}
        gang_node(kube, "gang-c")  # room for the third: the whole gang is placed at once
        assert until(lambda: all(p["spec"].get("nodeName") for p in pods()), 90), \
            diagnose(kube, tmp_path)
        placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods()}
        print("placed:", json.dumps(placed, sort_keys=True))
        assert sorted(placed.values()) == ["gang-a", "gang-b", "gang-c"]
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=60)
