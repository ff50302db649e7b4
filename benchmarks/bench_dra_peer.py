"""Pods with ResourceClaimTemplates, Fluence beside kube-scheduler on one real API server.

    KUBEBUILDER_ASSETS=... python benchmarks/bench_dra_peer.py [--nodes 100] [--devices 8]
                                                               [--pods 500] [--qps 5000]

The shape of scheduler_perf's SchedulingWithResourceClaimTemplate, at a size this
machine holds: a fresh etcd + kube-apiserver + kube-controller-manager (whose
resourceclaim controller makes each pod's claim from its template), ``--nodes``
fake nodes each publishing one ResourceSlice of ``--devices`` devices, a
DeviceClass, and ``--pods`` pods each with a template claim of one device. Each
scheduler runs as its own process with the same client limits (``peer.py``):
started and shown ready by a probe pod, paused while the pods are created and
their claims made, resumed; the clock runs until no pod is left unbound. Between
the two, every pod is deleted and every claim released. Prints pods per second of
each and the ratio, and checks that no device was allocated twice.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from peer import Run, _in_parallel, delete_workload, fluence_peer, kube_scheduler_peer
from fluence_core.kube.api import DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from fluence_core.kube.api import RESOURCE_SLICES
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request, make_pod_dict,
    make_resource_slice_dict,
)
from fluence_core.testing_apiserver import ensure_namespace, find_assets, start_apiserver

DRIVER = "gpu.peer.example.com"


def _pod(name: str, scheduler: str | None) -> dict[str, Any]:
    return make_pod_dict(name, "100m", namespace=None, scheduler=scheduler or "default-scheduler",
                         resourceClaims=claim_entries(gpu="template:gpu"))


def _claims_made(run: Run, namespace: str, pods: int) -> bool:
    made = [p for p in run.kube.list("pods", namespace).items
            if (p.get("status") or {}).get("resourceClaimStatuses")]
    return len(made) >= pods


def _allocated(run: Run) -> list[tuple[str, str]]:
    found = []
    for claim in run.kube.list(RESOURCE_CLAIMS).items:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        found += [(r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get(
            "results") or []]
    return found


def scenario(run: Run, peer: Any, limits: tuple[float, int], pods: int) -> float:
    namespace = f"{peer.name}-{int(time.time() * 1000) % 10**8}"
    ensure_namespace(run.kube, namespace)
    run.kube.create(RESOURCE_CLAIM_TEMPLATES, {"metadata": {"name": "gpu"}, "spec": {"spec": {
        "devices": {"requests": [make_device_request("gpu", "peer-gpu")]}}}}, namespace)
    with peer.running(run.server, limits, run.workdir) as process:
        run.ready(peer, process, namespace)
        os.kill(process.pid, signal.SIGSTOP)
        _in_parallel(lambda i: run.kube.create("pods", _pod(f"p{i}", peer.scheduler_name),
                                               namespace), list(range(pods)))
        deadline = time.monotonic() + 300
        while not _claims_made(run, namespace, pods):  # the controller made every claim
            if time.monotonic() > deadline:
                raise SystemExit("the resourceclaim controller did not make the claims")
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGCONT)
        elapsed = run.wait_bound(namespace, 900)
        taken = _allocated(run)
        if len(taken) != len(set(taken)):
            raise SystemExit(f"{peer.name}: a device allocated twice")
    delete_workload(run.kube, namespace)
    deadline = time.monotonic() + 300
    while _allocated(run):  # the controller releases the claims of the deleted pods
        if time.monotonic() > deadline:
            raise SystemExit("claims still allocated 300 s after their pods went")
        time.sleep(0.5)
    return pods / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--qps", type=float, default=5000.0)
    args = parser.parse_args()
    assets, reason = find_assets()
    if assets is None:
        raise SystemExit(reason)
    binary = Path(os.environ.get("KUBE_SCHEDULER") or assets / "kube-scheduler")
    limits = (args.qps, int(args.qps))
    with tempfile.TemporaryDirectory() as tmp, \
            start_apiserver(assets, Path(tmp), controller_manager=True) as server:
        run = Run(server, args.nodes, Path(tmp))
        run.kube.create(DEVICE_CLASSES, make_device_class_dict(
            "peer-gpu", f'device.driver == "{DRIVER}"'))
        _in_parallel(lambda i: run.kube.create(RESOURCE_SLICES, make_resource_slice_dict(
            f"peer-{i}-gpus", DRIVER, [make_device(f"gpu{d}") for d in range(args.devices)],
            node=f"peer-{i}")), list(range(args.nodes)))
        kubeconfig = server.kubeconfig()
        rates = {peer.name: scenario(run, peer, limits, args.pods)
                 for peer in (kube_scheduler_peer(binary, kubeconfig), fluence_peer(kubeconfig))}
    print(f"{args.pods} pods with a template claim, {args.nodes} nodes x {args.devices} "
          f"devices, {args.qps:g} QPS: kube-scheduler {rates['kube-scheduler']:.1f} pods/s, "
          f"fluence {rates['fluence']:.1f} pods/s "
          f"({rates['fluence'] / rates['kube-scheduler']:.2f}x)")


if __name__ == "__main__":
    main()
