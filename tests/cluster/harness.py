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
import selectors
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.cluster import sources

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
    fluence = IMAGES / "localhost_fluence-local_fluence_0.1.0.tar"
    built_from = Path(f"{fluence}.sources")
    recorded = built_from.read_text().strip() if built_from.is_file() else "unknown sources"
    if recorded != sources.digest():
        return (f"Fluence's image {fluence} was built from {recorded[:12]}, not from this tree's "
                f"code ({sources.digest()[:12]}): rebuild it with tests/cluster/images.sh "
                "fluence archives")
    if (STATE / "up").exists():
        return f"a local cluster is up already ({STATE}/up): run local-cluster.sh down first"
    return ""


def why_no_cdi() -> str:
    """Why the cluster's containers cannot be given CDI devices (a containerd before 1.7;
    ``CONTAINERD_BIN`` names another), or ''."""
    done = subprocess.run(["bash", str(SCRIPT), "cdi"], capture_output=True, text=True,
                          timeout=30)
    return done.stdout.strip()


def ctr() -> str:
    """The ctr beside the containerd the nodes run: ``$CONTAINERD_BIN/ctr``, else PATH's."""
    folder = os.environ.get("CONTAINERD_BIN")
    return str(Path(folder) / "ctr") if folder else "ctr"


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


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod.get("status", {}).get("conditions", []))


def list_pods(cluster: Cluster, namespace: str, *selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get("-n", namespace, "pods", *selector)["items"]
    return items


def show_pods(found: list[dict[str, Any]]) -> None:
    """Each pod's name, phase and node (``pytest -s`` shows them)."""
    for pod in sorted(found, key=lambda p: p["metadata"]["name"]):
        print(f"  {pod['metadata']['name']:48} {pod['status'].get('phase', '?'):10} "
              f"{pod['spec'].get('nodeName', '-')}")


def container_pid(pod: dict[str, Any]) -> int:
    """The host pid of the pod's first container, from its node's containerd (each node
    here has its own, under $FLUENCE_CLUSTER_DIR/node-N)."""
    container = pod["status"]["containerStatuses"][0]["containerID"].removeprefix(
        "containerd://")
    socket = STATE / pod["spec"]["nodeName"] / "containerd.sock"
    listed = subprocess.run([ctr(), "--address", str(socket), "-n", "k8s.io", "tasks", "ls"],
                            capture_output=True, text=True, timeout=30, check=True).stdout
    for line in listed.splitlines()[1:]:
        task, pid, *_ = line.split()
        if task == container:
            return int(pid)
    raise AssertionError(f"no task {container} of pod {pod['metadata']['name']} on {socket}")


class PodWatch:
    """``kubectl get pods -w`` on a namespace, to act the moment a pod is bound."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.process = subprocess.Popen(
            [str(cluster.kubectl_binary), "--kubeconfig", str(cluster.kubeconfig),
             "-n", namespace, "get", "pods", "--watch", "--output",
             "jsonpath={.metadata.name} {.spec.nodeName}{\"\\n\"}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def __enter__(self) -> PodWatch:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.process.kill()
        self.process.wait()

    def first_bound(self, timeout: float) -> str:
        """The name of the first pod seen with a node (read unbuffered: a line must not wait
        in a buffer while the selector waits for more)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(left):
                    break
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError("kubectl get pods --watch ended")
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    name, _, node = line.decode().strip().partition(" ")
                    if node:
                        return name
        raise AssertionError(f"no pod was bound within {timeout:g} s")


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
