"""End to end: a real kube-apiserver calls the webhook over HTTPS (KUBEBUILDER_ASSETS, else
skipped).

The apiserver is this module's own (not shared with tests/e2e), so the Node it
needs for admission control disturbs nobody. The webhook runs in-process on
127.0.0.1 with a generated CA patched into the configuration, as bootstrap does
(``webhook_beside``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.errors import ApiError
from fluence_core.settings import load_settings
from fluence_core.testing import indexed_job_pods, make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import (
    ensure_namespace,
    find_assets,
    start_apiserver,
    webhook_beside,
)

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "hybrid"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("webhook-e2e")
    with start_apiserver(assets, work / "apiserver", controller_manager=False) as server:
        kube = server.cluster(qps=1000, burst=1000)
        ensure_namespace(kube, NAMESPACE)
        kube.create("nodes", make_node_dict("n1", 16, "64Gi", capacity=True))
        kube.create(
            "priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": names.QUANTUM_PRIORITY_CLASS},
                "value": 1000,
            },
        )
        settings = load_settings(webhook_config="fluence-e2e",
                                 runtime_image="example.org/fluence:e2e")
        with webhook_beside(kube, settings, work / "tls", namespace=NAMESPACE) as webhook:
            yield server, kube, webhook
        kube.close()


def kubectl(server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={server.kubeconfig()}", "-n", NAMESPACE, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def env_names(pod, container="app"):
    found = next(c for c in pod["spec"]["containers"] if c["name"] == container)
    return {e["name"] for e in found.get("env") or []}


def test_kubectl_apply_of_the_qrmi_pod_yields_its_fluxion_env_and_no_protection(env):
    server, kube, _ = env
    done = kubectl(server, "apply", "-f", str(REPO / "examples" / "qrmi-pod.yaml"))
    assert done.returncode == 0, done.stderr
    stored = kube.get("pods", "qrmi-sampler", NAMESPACE)
    assert names.ENV_BACKEND in env_names(stored)
    # a lone pod asking for a QPU is no hybrid group's: never marked protected
    assert names.PROTECTED_ANNOTATION not in stored["metadata"]["annotations"]


def settled(webhook) -> None:
    """Until the PodGroups of the pods admitted so far are written (after the answers)."""
    assert webhook.service.writer.flush(timeout=30), "background writes still pending"


def test_the_shared_job_is_split_into_scout_and_gated_workers(env):
    server, kube, webhook = env
    done = kubectl(server, "apply", "-f", str(REPO / "examples" / "quantum-shared-job.yaml"))
    assert done.returncode == 0, done.stderr
    job = kube.get("jobs", "vqe", NAMESPACE)
    # No controller manager here: make the Indexed Job's pods as the job controller would,
    # already grouped into a PodGroup of N (WorkloadWithJob).
    kube.create("podgroups", {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                              "metadata": {"name": "vqe-jc", "ownerReferences": [
                                  {"apiVersion": "batch/v1", "kind": "Job", "name": "vqe",
                                   "uid": job["metadata"]["uid"], "controller": True}]},
                              "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}, NAMESPACE)
    for pod in indexed_job_pods(job, schedulingGroup={"podGroupName": "vqe-jc"}):
        kube.create("pods", pod, NAMESPACE)
    scout = kube.get("pods", "vqe-0", NAMESPACE)
    assert scout["spec"]["schedulingGroup"]["podGroupName"] == "vqe-scout"
    assert [c["name"] for c in scout["spec"]["containers"]] == ["app", names.SIDECAR_CONTAINER]
    assert [c["name"] for c in scout["spec"]["initContainers"]] == [names.STAGE_CONTAINER]
    assert scout["spec"].get("serviceAccountName", "default") == "default"
    for index in (1, 2, 3):
        worker = kube.get("pods", f"vqe-{index}", NAMESPACE)
        assert worker["spec"]["schedulingGates"] == [{"name": names.QUANTUM_GATE}]
        assert worker["spec"]["schedulingGroup"]["podGroupName"] == "vqe"
        assert worker["spec"]["priorityClassName"] == names.QUANTUM_PRIORITY_CLASS
        assert worker["spec"]["priority"] == 1000
        assert worker["metadata"]["annotations"][names.PROTECTED_ANNOTATION] == "true"
        assert (
            names.extended_resource("qpu")
            not in worker["spec"]["containers"][0]["resources"]["requests"]
        )
    settled(webhook)
    groups = {g["metadata"]["name"]: g["spec"]["schedulingPolicy"]["gang"]["minCount"]
              for g in kube.list("podgroups", NAMESPACE).items
              if not g["metadata"].get("deletionTimestamp")}
    assert groups == {"vqe-scout": 1, "vqe": 3}
    # The job controller's gang of 4 is deleted; its protection finalizer goes once no pod
    # points at it (the controller manager's job, absent here).
    orphan = kube.get("podgroups", "vqe-jc", NAMESPACE)
    assert orphan is None or orphan["metadata"].get("deletionTimestamp")
    assert kube.list("rolebindings", NAMESPACE).items == [], "the webhook grants no rights"


def test_a_server_dry_run_creates_no_podgroup(env):
    server, kube, webhook = env
    manifest = ("apiVersion: v1\nkind: Pod\nmetadata: {name: dry, labels: "
                "{fluence.flux-framework.org/group: drygang}}\nspec: {schedulerName: fluence, "
                "containers: [{name: app, image: busybox}]}\n")
    done = subprocess.run(
        [
            "kubectl",
            f"--kubeconfig={server.kubeconfig()}",
            "-n",
            NAMESPACE,
            "create",
            "--dry-run=server",
            "-o",
            "json",
            "-f",
            "-",
        ],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"podGroupName": "drygang"' in done.stdout
    settled(webhook)
    assert kube.get("podgroups", "drygang", NAMESPACE) is None


def test_an_over_budget_quantum_group_is_refused_at_create(env):
    server, kube, _ = env
    qpu = {names.extended_resource("qpu"): "1"}
    pod = make_pod_dict("big-0", "8", extra=qpu, limits=qpu, namespace=None, image="x",
                        labels={names.GROUP_LABEL: "big"},
                        annotations={names.GROUP_SIZE_ANNOTATION: "4"})
    with pytest.raises(ApiError) as refused:
        kube.create("pods", pod, NAMESPACE)
    assert "group big needs 32 cores (4 pods x 8)" in str(refused.value)
    assert kube.get("pods", "big-0", NAMESPACE) is None
