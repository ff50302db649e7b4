"""``fluence webhook``, as a process on a real kube-apiserver, exits within a second of SIGTERM.

Its informers each hold a watch request open for a minute, and the API server ends one
only when that minute is up. Stopping an informer cancels the request in flight (the
client shuts its streaming response), so the process exits at once instead of waiting
for them. The test waits until the watches are live (a stamped pod's PodGroup, made by
the webhook's controller from its pod informer's event), then sends SIGTERM and times
the exit. Skipped without KUBEBUILDER_ASSETS.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.testing import make_pod_dict
from fluence_core.testing_apiserver import ApiServer, free_port, stop_process, wait_for
from fluence_core.webhook.transport import tls

pytestmark = pytest.mark.e2e

EXIT_BUDGET = 1.0
"""Seconds from SIGTERM to the process's exit."""


def _webhook(apiserver: ApiServer, namespace: str, workdir: Path) -> subprocess.Popen[bytes]:
    """``fluence webhook`` with a mounted certificate and a webhook configuration of a name
    no one registered: it publishes nothing, and serves, watches and makes PodGroups as
    deployed."""
    tls.generate(["localhost"], workdir / "tls", ip_addresses=["127.0.0.1"])
    environ = dict(os.environ, KUBECONFIG=str(apiserver.kubeconfig()),
                   FLUENCE_WEBHOOK_CERT_DIR=str(workdir / "tls"),
                   FLUENCE_WEBHOOK_BIND_ADDRESS="127.0.0.1",
                   FLUENCE_WEBHOOK_PORT=str(free_port()), FLUENCE_REPORT_PORT=str(free_port()),
                   FLUENCE_WEBHOOK_CONFIG=f"fluence-webhook-{namespace}")
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    command = [sys.executable, "-c", "from fluence_core.cli import main; main()", "webhook"]
    return subprocess.Popen(command, env=environ, stdout=subprocess.DEVNULL,
                            stderr=open(workdir / "webhook.log", "wb"))


def test_fluence_webhook_exits_within_a_second_of_sigterm(
        apiserver: ApiServer, kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    ns = kube_namespace
    log = tmp_path / "webhook.log"
    process = _webhook(apiserver, ns, tmp_path)
    try:
        wait_for(lambda: "serving AdmissionReview" in log.read_text() or process.poll(),
                 "the webhook serving")
        assert process.poll() is None, log.read_text()[-3000:]
        kube.create("pods", make_pod_dict(  # as the webhook stamps a bare gang's pod
            "s-0", "1", namespace=ns, group="s", labels={names.GROUP_LABEL: "s"},
            annotations={names.GROUP_SIZE_ANNOTATION: "1"}), ns)
        wait_for(lambda: kube.get("podgroups", "s", ns),
                 "the PodGroup the controller makes from its pod informer's event")
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        took = time.monotonic() - sent
        assert code == 0, log.read_text()[-3000:]
        assert took < EXIT_BUDGET, f"exited {took:.2f} s after SIGTERM"
        assert "signal 15, shutting down" in log.read_text()
    finally:
        stop_process(process)
        kube.delete("pods", "s-0", ns, grace_period_seconds=0)
        kube.delete("podgroups", "s", ns)
