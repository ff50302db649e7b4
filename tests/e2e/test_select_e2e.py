"""``kubectl fluence select`` against the ConfigMap ``fluence up`` keeps, on a real API server.

Everything runs with the rights deploy/ gives it, in a namespace standing in for
``fluence-system``: ``fluence up`` as the ``fluence`` ServiceAccount (the
scheduler's ClusterRole, the leader-election Role, and get/update on the one
ConfigMap of deploy/backends.yaml) asks the Braket and QRMI providers for their
local backends' figures and writes them; then real kubectl finds the
``kubectl-fluence`` console script on PATH and runs ``select`` as a user with no
right but the reader Role every signed-in user gets.
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
from fluence_core.kube.api import CONFIGMAPS
from fluence_core.kube.client import KubeCluster
from fluence_core.testing_apiserver import ApiServer, find_kubectl, stop_process

pytestmark = pytest.mark.e2e
pytest.importorskip("fluence_braket", reason="the Braket provider reports braket_local")
pytest.importorskip("fluence_qrmi", reason="the QRMI provider reports fake_manila")

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = (ROOT / "config" / "resources-local.yaml").read_text()
"""braket_local (local-simulator) and fake_manila (fake-backend): figures with no account."""


def _kubectl() -> str:
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("no kubectl in KUBEBUILDER_ASSETS or on PATH")
    return str(kubectl)


def _install(kube: KubeCluster, manifest: str, namespace: str, only: set[str] | None = None
             ) -> None:
    """deploy/<manifest>'s objects, moved from fluence-system into ``namespace`` (cluster-scoped
    ones renamed after it, so tests never share them)."""
    for document in yaml.safe_load_all((ROOT / "deploy" / manifest).read_text()):
        if not document or (only is not None and document["kind"] not in only):
            continue
        metadata = document["metadata"]
        if "namespace" in metadata:
            metadata["namespace"] = namespace
        else:
            metadata["name"] = f"{metadata['name']}-{namespace}"
        if document["kind"] == "ClusterRoleBinding":
            document["roleRef"]["name"] = f"{document['roleRef']['name']}-{namespace}"
        for subject in document.get("subjects") or ():
            if subject.get("namespace") == names.FLUENCE_NAMESPACE:
                subject["namespace"] = namespace
        plural = {"ConfigMap": "configmaps", "ServiceAccount": "serviceaccounts",
                  "Role": "roles", "RoleBinding": "rolebindings", "ClusterRole": "clusterroles",
                  "ClusterRoleBinding": "clusterrolebindings"}[document["kind"]]
        kube.create(plural, document, namespace)


def _kubeconfig_for(apiserver: ApiServer, account: str, namespace: str, folder: Path) -> Path:
    """A kubeconfig holding a bound token of ServiceAccount ``account`` (kubectl create token)."""
    token = subprocess.run(
        [_kubectl(), "--kubeconfig", str(apiserver.kubeconfig()), "create", "token", account,
         "-n", namespace, "--duration=1h"], capture_output=True, text=True, timeout=60)
    assert token.returncode == 0, token.stderr
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
        "clusters": [{"name": "e2e", "cluster": {"server": apiserver.url,
                                                 "certificate-authority": str(apiserver.ca_file)}}],
        "users": [{"name": account, "user": {"token": token.stdout.strip()}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": account,
                                                 "namespace": namespace}}],
    }
    path = folder / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _environment(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("FLUENCE_", "AWS_", "QISKIT_", "KUBERNETES_"))}
    environ.update(AWS_EC2_METADATA_DISABLED="true", **extra)
    return environ


@pytest.fixture
def fluence_up(apiserver: ApiServer, kube: KubeCluster, kube_namespace: str,
               tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``fluence up`` as deploy/ runs it, in ``kube_namespace``, refreshing every 2 s."""
    kube.create(CONFIGMAPS, {"metadata": {"name": names.RESOURCES_CONFIGMAP},
                             "data": {names.RESOURCES_CONFIGMAP_KEY: RESOURCES}}, kube_namespace)
    _install(kube, "fluence.yaml", kube_namespace,
             {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})
    _install(kube, "backends.yaml", kube_namespace)
    resources = tmp_path / "resources.yaml"
    resources.write_text(RESOURCES)
    kubeconfig = _kubeconfig_for(apiserver, "fluence", kube_namespace, tmp_path)
    environ = _environment(
        KUBECONFIG=str(kubeconfig), FLUENCE_RESOURCES=str(resources),
        FLUENCE_LEASE_NAMESPACE=kube_namespace, FLUENCE_BACKEND_REFRESH="2",
        FLUENCE_METRICS_PORT="0", HOME=str(tmp_path))
    log = open(tmp_path / "fluence-up.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-c", "from fluence_core.cli import main; main()", "up"],
        env=environ, stdout=subprocess.DEVNULL, stderr=log)
    yield process
    stop_process(process)
    log.close()
    for kind in ("clusterrolebindings", "clusterroles"):
        kube.delete(kind, f"fluence-scheduler-{kube_namespace}")


def _figures(kube: KubeCluster, namespace: str) -> dict[str, Any]:
    found = kube.get(CONFIGMAPS, names.BACKENDS_CONFIGMAP, namespace) or {}
    data = yaml.safe_load((found.get("data") or {}).get(names.BACKENDS_CONFIGMAP_KEY) or "{}")
    return data or {}


def _wait_for_figures(kube: KubeCluster, namespace: str, log: Path,
                      timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        figures = _figures(kube, namespace)
        if {"braket_local", "fake_manila"} <= set(figures):
            return figures
        time.sleep(1)
    pytest.fail(f"fluence up wrote no figures in {timeout}s:\n{log.read_text()[-3000:]}")


def test_kubectl_fluence_select_reads_the_configmap_and_keeps_a_provider_pin(
    apiserver: ApiServer, kube: KubeCluster, kube_namespace: str,
    fluence_up: subprocess.Popen[bytes], tmp_path: Path, qrmi_pinned_pod: str,
) -> None:
    figures = _wait_for_figures(kube, kube_namespace, tmp_path / "fluence-up.log")
    print("ConfigMap written by fluence up:", json.dumps(figures, indent=2))
    assert figures["fake_manila"]["qubits"] == 5 and figures["fake_manila"]["status"] == "online"
    assert figures["braket_local"]["source"] == "braket local"

    # a user whose only rights are deploy/backends.yaml's reader Role (system:authenticated)
    kube.create("serviceaccounts", {"metadata": {"name": "alice"}}, kube_namespace)
    alice = _kubeconfig_for(apiserver, "alice", kube_namespace, tmp_path)
    kubectl = _kubectl()
    path = os.pathsep.join([str(Path(sys.executable).parent), str(Path(kubectl).parent),
                            "/usr/bin", "/bin"])
    environ = _environment(KUBECONFIG=str(alice), PATH=path, HOME=str(tmp_path))
    can_list = subprocess.run([kubectl, "auth", "can-i", "list", "configmaps"], env=environ,
                              capture_output=True, text=True, timeout=60)
    assert can_list.stdout.strip() == "no"

    plugins = subprocess.run([kubectl, "plugin", "list"], env=environ, capture_output=True,
                             text=True, timeout=60)
    assert str(Path(sys.executable).parent / names.KUBECTL_PLUGIN) in plugins.stdout

    manifest = tmp_path / "bell.yaml"
    manifest.write_text(qrmi_pinned_pod)
    configmap = f"--configmap={kube_namespace}/{names.BACKENDS_CONFIGMAP}"
    pinned = subprocess.run([kubectl, "fluence", "select", str(manifest), configmap],
                            env=environ, capture_output=True, text=True, timeout=300)
    print(pinned.stderr)
    assert pinned.returncode == 0, pinned.stderr
    annotations = yaml.safe_load(pinned.stdout)["metadata"]["annotations"]
    assert annotations[names.REQUIRE_ANNOTATION_PREFIX + "provider"] == "qrmi"
    assert annotations[names.REQUIRE_BACKEND_ANNOTATION] == "fake_manila"
    record = json.loads(annotations[names.SELECTION_ANNOTATION])
    braket = next(c for c in record["candidates"] if c["backend"] == "braket_local")
    assert braket["excluded"] == "require-provider=qrmi: provider is braket"
    assert record["candidates"][0]["source"].startswith(
        f"configmap {kube_namespace}/{names.BACKENDS_CONFIGMAP} (qiskit-ibm-runtime local, ")

    # without the pin the same figures choose the other provider's backend (tie: by name)
    unpinned = subprocess.run([kubectl, "fluence", "select", configmap], env=environ,
                              capture_output=True, text=True, timeout=300)
    assert unpinned.returncode == 0, unpinned.stderr
    assert unpinned.stdout.strip() == "braket_local"

    other = subprocess.run([kubectl, "fluence", "status"], env=environ, capture_output=True,
                           text=True, timeout=60)
    assert other.returncode == 2 and "fluence status" in other.stderr
