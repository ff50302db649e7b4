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
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from fluence_flux.handler import INIT_CONTAINER
from flux_helpers import job, jobset

from fluence_core.api import ApiError, Resource, load_settings, names
from fluence_core.testing import (
    WebhookServer,
    build_service,
    find_assets,
    get_plugin_manager,
    server_context,
    start_apiserver,
    tls,
)

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[3]
NAMESPACE = "flux"
CRDS = Resource("customresourcedefinitions", "CustomResourceDefinition",
                group="apiextensions.k8s.io", namespaced=False)

JOBSET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {"group": "jobset.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "jobsets", "singular": "jobset", "kind": "JobSet", "listKind": "JobSetList"},
             "versions": [{"name": "v1alpha2", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def shipped_entry() -> dict:
    for doc in yaml.safe_load_all((REPO / "deploy" / "webhook.yaml").read_text()):
        if doc and doc.get("kind") == "MutatingWebhookConfiguration":
            return next(w for w in doc["webhooks"] if w["name"] == "workloads.fluence.flux-framework.org")
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
        service = build_service(settings, get_plugin_manager(settings), kube)
        httpd = WebhookServer(("127.0.0.1", 0), service,
                              ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        # The workloads entry of deploy/webhook.yaml as shipped (rules, matchConditions), pointed here.
        entry = copy.deepcopy(shipped_entry())
        entry["clientConfig"] = {"url": f"https://127.0.0.1:{httpd.port}/mutate"}
        entry["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
        kube.create("mutatingwebhookconfigurations", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "fluence-flux-e2e"}, "webhooks": [entry]})
        tls.patch_ca_bundle(kube, "fluence-flux-e2e", cert.ca_pem)
        yield server, kube, assets
        httpd.shutdown()
        kube.close()


def kubectl(server, assets, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    binary = assets / "kubectl" if (assets / "kubectl").exists() else shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not in KUBEBUILDER_ASSETS nor on PATH")
    return subprocess.run([str(binary), f"--kubeconfig={server.kubeconfig()}", "-n", NAMESPACE, *args],
                          input=stdin, capture_output=True, text=True, timeout=60)


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
    svc = kube.get("services", "flux-lammps", NAMESPACE)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"batch.kubernetes.io/job-name": "flux-lammps"}
    want = [{"apiVersion": "batch/v1", "kind": "Job", "name": "flux-lammps", "uid": stored["metadata"]["uid"]}]
    for kind, name in (("configmaps", "flux-lammps-flux"), ("secrets", "flux-lammps-flux-curve"),
                       ("services", "flux-lammps")):
        assert until(lambda k=kind, n=name: owners(kube, k, n) == want), (kind, owners(kube, kind, name))
    data = kube.get("configmaps", "flux-lammps-flux", NAMESPACE)["data"]
    assert "nodes=4" in data["entrypoint.sh"] and "tasks_per_node=2" in data["entrypoint.sh"]
    assert 'host = "flux-lammps-[0-3]"' in data["init.sh"]
    cert = base64.b64decode(kube.get("secrets", "flux-lammps-flux-curve", NAMESPACE)["data"]["curve.cert"])
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
    assert json.loads(done.stdout)["spec"]["template"]["spec"]["initContainers"][0]["name"] == INIT_CONTAINER
    assert kube.get("configmaps", "dry-flux", NAMESPACE) is None


def test_a_jobset_is_rewritten_and_its_configmap_owned(env):
    server, kube, assets = env
    jobsets = Resource("jobsets", "JobSet", group="jobset.x-k8s.io", version="v1alpha2")
    stored = kube.create(jobsets, here(jobset("train", nodes=3, annotations={names.FLUX_ANNOTATION: "true"})),
                         NAMESPACE)
    assert stored["spec"]["network"] == {"enableDNSHostnames": True}
    pod = stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["name"] == INIT_CONTAINER
    assert pod["containers"][0]["args"] == ["python3", "train.py"]
    want = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
             "uid": stored["metadata"]["uid"]}]
    assert until(lambda: owners(kube, "configmaps", "train-flux") == want)
    assert 'host = "train-node-0-[0-2]"' in kube.get("configmaps", "train-flux", NAMESPACE)["data"]["init.sh"]
    assert kube.get("services", "train", NAMESPACE) is None  # the JobSet controller's to make


def test_a_job_that_does_not_ask_for_flux_is_not_sent_to_the_webhook(env):
    server, kube, assets = env
    stored = kube.create("jobs", here(job("plain", flux=False)), NAMESPACE)
    assert "initContainers" not in stored["spec"]["template"]["spec"]
    assert kube.get("configmaps", "plain-flux", NAMESPACE) is None
