"""The manifests in deploy/ and examples/ pass a real API server's validation (server-side dry run).

Dry run, because a live MutatingWebhookConfiguration with no webhook behind it
would refuse every Fluence pod the other e2e tests create.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.testing_apiserver import ApiServer, ensure_namespace, find_kubectl

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ["deploy/namespace.yaml", "deploy/fluence-resources.yaml", "deploy/fluence.yaml",
             "deploy/webhook.yaml", "deploy/device-plugin.yaml", "deploy/backends.yaml",
             "deploy/admission-policy.yaml", "deploy/quantum-priority-policy.yaml",
             "deploy/qpu-driver.yaml",
             "deploy/optional/webhook-networkpolicy.yaml",
             "examples/pod.yaml", "examples/podgroup.yaml"]


def _kubectl() -> str:
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("no kubectl in KUBEBUILDER_ASSETS or on PATH")
    return str(kubectl)


def _dry_run(apiserver: ApiServer, kube: KubeCluster, *source: str) -> str:
    """``kubectl apply --dry-run=server`` of ``source``; its stdout (namespaces made first:
    a dry run creates nothing, so namespaced objects need theirs to exist already, with
    the ``default`` ServiceAccount a pod is admitted with)."""
    kubectl = _kubectl()
    for namespace in ("fluence-system", "default"):
        ensure_namespace(kube, namespace)
    result = subprocess.run(
        [kubectl, "--kubeconfig", str(apiserver.kubeconfig()), "apply", "--dry-run=server",
         *source],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "(server dry run)" in result.stdout
    return result.stdout


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_manifest_is_accepted_by_the_api_server(
    manifest: str, apiserver: ApiServer, kube: KubeCluster
) -> None:
    _dry_run(apiserver, kube, "-f", str(ROOT / manifest))


def test_the_kustomization_installs_everything(apiserver: ApiServer, kube: KubeCluster) -> None:
    output = _dry_run(apiserver, kube, "-k", str(ROOT / "deploy"))
    print(output)
    for expected in ("namespace/fluence-system", "configmap/fluence-resources",
                     "deployment.apps/fluence ", "deployment.apps/fluence-webhook",
                     "mutatingwebhookconfiguration.admissionregistration.k8s.io/fluence-webhook",
                     "daemonset.apps/fluence-device-plugin",
                     "deployment.apps/fluence-qpu-driver",
                     "daemonset.apps/fluence-qpu-kubelet-plugin",
                     "deviceclass.resource.k8s.io/qpu.fluxion.flux-framework.org",
                     "priorityclass.scheduling.k8s.io/fluence-quantum-classical",
                     "validatingadmissionpolicy.admissionregistration.k8s.io/"
                     "fluence-quantum-priority",
                     "validatingadmissionpolicybinding.admissionregistration.k8s.io/"
                     "fluence-quantum-priority"):
        assert expected in output
