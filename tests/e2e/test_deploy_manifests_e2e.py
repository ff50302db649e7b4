"""The manifests in deploy/ and examples/ pass a real API server's validation (server-side dry run).

Dry run, because a live MutatingWebhookConfiguration with no webhook behind it
would refuse every Fluence pod the other e2e tests create.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fluence_core.kube import KubeCluster
from fluence_core.kube_errors import Conflict
from fluence_core.testing_apiserver import ApiServer, find_assets

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ["deploy/fluence.yaml", "deploy/webhook.yaml", "deploy/device-plugin.yaml",
             "examples/pod.yaml", "examples/podgroup.yaml"]


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_manifest_is_accepted_by_the_api_server(manifest: str, apiserver: ApiServer, kube: KubeCluster) -> None:
    assets, _ = find_assets()
    bundled = assets / "kubectl" if assets is not None else None
    kubectl = str(bundled) if bundled is not None and bundled.exists() else shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl in KUBEBUILDER_ASSETS or on PATH")
    try:
        kube.create("namespaces", {"metadata": {"name": "fluence-system"}})
    except Conflict:
        pass
    result = subprocess.run(
        [str(kubectl), "--kubeconfig", str(apiserver.kubeconfig()), "apply", "--dry-run=server",
         "-f", str(ROOT / manifest)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "(server dry run)" in result.stdout
