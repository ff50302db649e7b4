"""The cluster tier's harness: is the local cluster possible here, and kubectl on it.

``tests/cluster/local-cluster.sh`` brings up etcd, kube-apiserver, the controller
manager, kube-scheduler, kube-proxy, a stand-in cluster DNS and two kubelets (each
with its own containerd), loads the images ``tests/cluster/images.sh`` built, and
applies ``deploy/`` through ``tests/cluster/overlay``. :func:`why_not` names
what is missing (binaries, tools, images) before anything starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCRIPT = HERE / "local-cluster.sh"
STATE = Path(os.environ.get("FLUENCE_CLUSTER_DIR", "/var/tmp/fluence-cluster"))
IMAGES = STATE / "images"
REQUIRED_ARCHIVES = {
    "localhost_fluence-local_pause_1.tar": "the pause image",
    "localhost_fluence-local_debian_bookworm.tar": "the workload image",
    "localhost_fluence-local_fluence_0.1.0.tar": "Fluence's image",
}
BRAKET_ARCHIVE = "ghcr.io_flux-framework_fluence-example-braket-qaoa_0.1.0.tar"
WORKLOAD_IMAGE = "localhost/fluence-local/debian:bookworm"


def why_not() -> str:
    """Why the tier cannot run here, or ''."""
    if os.name != "posix" or os.geteuid() != 0:
        return "the local cluster needs root (kubelets, containerd, bridges, cgroups)"
    done = subprocess.run(["bash", str(SCRIPT), "missing"], capture_output=True, text=True,
                          timeout=30)
    if done.stdout.strip():
        return f"missing for tests/cluster/local-cluster.sh: {done.stdout.strip()}"
    absent = [f"{what} ({IMAGES / name})" for name, what in REQUIRED_ARCHIVES.items()
              if not (IMAGES / name).is_file()]
    if absent:
        return ("not built (run tests/cluster/images.sh): " + ", ".join(absent))
    if (STATE / "up").exists():
        return f"a local cluster is up already ({STATE}/up): run local-cluster.sh down first"
    return ""


@dataclass
class Cluster:
    """kubectl on the local cluster, as its admin."""

    kubeconfig: Path
    kubectl_binary: Path

    def run(self, *args: str, input: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.kubectl_binary), "--kubeconfig", str(self.kubeconfig),
                               *args], input=input, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", "-o", "json", *args).stdout)

    def apply(self, manifest: str, namespace: str | None = None) -> None:
        extra = ["-n", namespace] if namespace else []
        self.run("apply", *extra, "-f", "-", input=manifest)

    def namespace(self, prefix: str) -> str:
        """A fresh namespace (a run against a kept cluster does not meet the last one's)."""
        name = f"{prefix}-{uuid.uuid4().hex[:5]}"
        self.run("create", "namespace", name)
        wait(lambda: self.run("-n", name, "get", "serviceaccount", "default",
                              check=False).returncode == 0, f"namespace {name}'s ServiceAccount")
        return name

    def logs(self, namespace: str, pod: str, *args: str) -> str:
        return self.run("-n", namespace, "logs", pod, *args).stdout


def wait(check: Any, what: str, timeout: float = 180, every: float = 1.0) -> Any:
    """Poll ``check`` until truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def script(*args: str, timeout: float = 600) -> None:
    done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"local-cluster.sh {' '.join(args)} failed:\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
