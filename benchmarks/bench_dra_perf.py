"""scheduler_perf's DRA workloads, Fluence beside kube-scheduler on one real API server.

    KUBEBUILDER_ASSETS=... python benchmarks/bench_dra_perf.py [--nodes 500]
        [--workloads template,steady,gang] [--baseline CHECKOUT] [--profile DIR]

The cluster is scheduler_perf's (Kubernetes 1.36, ``test/integration/scheduler_perf/dra``):
``--nodes`` nodes (4 cpu, 32Gi, 110 pods, label ``node-with-dra``) each publishing one
ResourceSlice of ``--devices`` (``maxClaimsPerNode``, 10) devices of the driver
``test-driver.cdi.k8s.io``, with its four attributes and 1Gi of memory each; the
DeviceClass ``test-class`` selects the driver by CEL; pods are a pause container with
one claim from the ResourceClaimTemplate ``test-claim-template`` (one device of the
class). kube-controller-manager makes the claims from the templates and releases them,
with client limits high enough not to be what is measured (scheduler_perf runs its
resourceclaim controller in-process). The nodes also carry a rack label, ``--rack``
nodes a rack, for the gang. The workloads, each scheduler in turn (kube-scheduler,
Fluence, and Fluence from ``--baseline`` when given), each as its own process with
the same client limits (``peer.py``):

* ``template`` -- SchedulingWithResourceClaimTemplate: ``--init-pods`` pods placed
  first (not measured), then the scheduler is paused while ``--measure-pods`` more are
  created and their claims made, and resumed: pods/s until the last is bound
  (5000pods_500nodes: 2,500 + 2,500 on 500 nodes of 10 devices, the cluster full);
* ``steady`` -- SteadyStateClusterResourceClaimTemplate (empty_500nodes): batches of
  ``--steady-count`` pods are created, and once all are bound deleted and the next
  batch created, for ``--steady-seconds``; pods/s is pods bound over the time taken;
* ``gang`` -- a PodGroup of ``--gang`` pods (gang policy, every member or none), each
  with a claim of ``--gang-devices`` devices, required in one rack
  (``schedulingConstraints.topology``, kube-scheduler's TopologyAwareWorkloadScheduling
  too): the seconds from resume to the last binding, the gang checked in one rack.

After each run every claim's allocation is read: a device allocated twice, or a gang
member's devices off its node, stops the benchmark. Rows are printed as measured, with
the ratio to kube-scheduler; ``--output`` gets them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from peer import Peer, Run, _in_parallel, fluence_peer, kube_scheduler_peer
from fluence_core import names
from fluence_core.kube.api import (
    DEVICE_CLASSES, PODGROUPS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, RESOURCE_SLICES,
    Cancellation,
)
from fluence_core.testing import make_device_class_dict, make_device_request
from fluence_core.testing_apiserver import ensure_namespace, find_assets, start_apiserver

DRIVER = "test-driver.cdi.k8s.io"
CLASS = "test-class"
TEMPLATE = "test-claim-template"
GANG_TEMPLATE = "gang-claim-template"
CONTROLLER_LIMITS = ("--kube-api-qps=5000", "--kube-api-burst=5000")


def node_name(i: int) -> str:
    return f"scheduler-perf-dra-{i}"


def _node(i: int, rack: int) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"metadata": {"name": node_name(i), "labels": {
        "node-with-dra": "true", "kubernetes.io/hostname": node_name(i),
        names.RACK_LABEL: f"rack-{i // rack}"}},
        "status": {"capacity": capacity, "allocatable": capacity, "phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _slice(node: str, devices: int) -> dict[str, Any]:
    """The slice scheduler_perf's createResourceDriver publishes for ``node``."""
    return {"metadata": {"name": node}, "spec": {
        "driver": DRIVER, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"instance-{d}", "attributes": {
            "model": {"string": "A100"}, "family": {"string": "GPU"},
            "driverVersion": {"version": "1.2.3"}, "dra.example.com/numa": {"int": d}},
            "capacity": {"memory": {"value": "1Gi"}}} for d in range(devices)]}}


def _template(name: str, count: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"spec": {"devices": {
        "requests": [make_device_request("req-0", CLASS, count)]}}}}


def _pod(name: str, scheduler: str | None, template: str = TEMPLATE,
         group: str | None = None) -> dict[str, Any]:
    """scheduler_perf's pod-with-claim-template.yaml (and a gang member's group)."""
    spec: dict[str, Any] = {
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                        "resources": {"claims": [{"name": "resource"}]}}],
        "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": template}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name}, "spec": spec}


def _namespace(run: Run, peer: Peer, what: str) -> str:
    namespace = f"{peer.name}-{what}-{int(time.time() * 1000) % 10**8}"
    ensure_namespace(run.kube, namespace)
    return namespace


def _create_pods(run: Run, namespace: str, pods: Sequence[dict[str, Any]]) -> None:
    _in_parallel(lambda p: run.kube.create("pods", p, namespace), list(pods))


def _wait(what: str, done: Callable[[], bool], timeout: float, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {timeout:.0f} s")
        time.sleep(every)


def _claims_made(run: Run, namespace: str, pods: int) -> bool:
    """The resourceclaim controller made every pod's claim (and said so in its status)."""
    made = [p for p in run.kube.list("pods", namespace).items
            if (p.get("status") or {}).get("resourceClaimStatuses")]
    return len(made) >= pods


def allocations(run: Run) -> dict[tuple[str, str], list[tuple[str, str, str]]]:
    """Every allocated claim's devices (driver, pool, device), by namespace and name."""
    found = {}
    for claim in run.kube.list(RESOURCE_CLAIMS).items:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        if results:
            key = (claim["metadata"]["namespace"], claim["metadata"]["name"])
            found[key] = [(r["driver"], r["pool"], r["device"]) for r in results]
    return found


def check_no_double(run: Run, who: str) -> int:
    """Raise if any device is in two claims' allocations; the count of devices allocated."""
    taken = [d for devices in allocations(run).values() for d in devices]
    if len(taken) != len(set(taken)):
        twice = sorted({d for d in taken if taken.count(d) > 1})[:5]
        raise SystemExit(f"{who}: devices allocated twice: {twice}")
    return len(taken)


def release_all(run: Run, namespaces: Sequence[str]) -> None:
    """Delete the pods and PodGroups of ``namespaces``; wait for every claim to be let go."""
    for namespace in namespaces:
        pods = [p["metadata"]["name"] for p in run.kube.list("pods", namespace).items]
        _in_parallel(lambda n: run.kube.delete("pods", n, namespace, grace_period_seconds=0),
                     pods)
        for group in run.kube.list(PODGROUPS, namespace).items:
            run.kube.delete(PODGROUPS, group["metadata"]["name"], namespace)
    _wait("claims still allocated after their pods went", lambda: not allocations(run), 600,
          every=1.0)


def template_run(run: Run, peer: Peer, limits: tuple[float, int], init: int,
                 measure: int) -> float:
    """SchedulingWithResourceClaimTemplate: pods/s of the measured pods."""
    init_ns, test_ns = _namespace(run, peer, "init"), _namespace(run, peer, "test")
    for namespace in (init_ns, test_ns):
        run.kube.create(RESOURCE_CLAIM_TEMPLATES, _template(TEMPLATE, 1), namespace)
    with peer.running(run.server, limits, run.workdir) as process:
        run.ready(peer, process, test_ns)
        _create_pods(run, init_ns, [_pod(f"init-{i}", peer.scheduler_name)
                                    for i in range(init)])
        run.wait_bound(init_ns, 1800)
        os.kill(process.pid, signal.SIGSTOP)
        _create_pods(run, test_ns, [_pod(f"test-{i}", peer.scheduler_name)
                                    for i in range(measure)])
        _wait("the resourceclaim controller did not make the claims",
              lambda: _claims_made(run, test_ns, measure), 600)
        os.kill(process.pid, signal.SIGCONT)
        with run.sampled(peer, process, "template"):
            elapsed = run.wait_bound(test_ns, 1800)
        check_no_double(run, peer.name)
    release_all(run, [init_ns, test_ns])
    return measure / elapsed


class BoundWatch:
    """Names of the pods of one namespace seen bound, from a watch on its own thread."""

    def __init__(self, run: Run, namespace: str) -> None:
        self.bound: set[str] = set()
        self.changed = threading.Condition()
        self.cancel = Cancellation()
        self._thread = threading.Thread(target=self._follow, args=(run, namespace),
                                        daemon=True)
        self._thread.start()

    def _follow(self, run: Run, namespace: str) -> None:
        for _, pod in run.kube.watch("pods", namespace, cancel=self.cancel):
            if (pod.get("spec") or {}).get("nodeName"):
                with self.changed:
                    self.bound.add(pod["metadata"]["name"])
                    self.changed.notify_all()

    def wait_for(self, names_: Sequence[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not self.bound.issuperset(names_):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(set(names_) - self.bound)} pods unbound "
                                       f"after {timeout:.0f} s")
                self.changed.wait(left)

    def stop(self) -> None:
        self.cancel.cancel()


def steady_run(run: Run, peer: Peer, limits: tuple[float, int], count: int,
               seconds: float) -> float:
    """SteadyStateClusterResourceClaimTemplate: pods bound per second while batches of
    ``count`` are created, bound and deleted for ``seconds``."""
    namespace = _namespace(run, peer, "steady")
    run.kube.create(RESOURCE_CLAIM_TEMPLATES, _template(TEMPLATE, 1), namespace)
    with peer.running(run.server, limits, run.workdir) as process:
        run.ready(peer, process, namespace)
        watch = BoundWatch(run, namespace)
        try:
            scheduled, batch = 0, 0
            with run.sampled(peer, process, "steady"):
                started = time.perf_counter()
                while time.perf_counter() - started < seconds:
                    batch_names = [f"s{batch}-{i}" for i in range(count)]
                    _create_pods(run, namespace, [_pod(n, peer.scheduler_name)
                                                  for n in batch_names])
                    watch.wait_for(batch_names, 300)
                    scheduled += count
                    if batch % 20 == 0:
                        check_no_double(run, peer.name)
                    _in_parallel(lambda n: run.kube.delete(
                        "pods", n, namespace, grace_period_seconds=0), batch_names)
                    batch += 1
                elapsed = time.perf_counter() - started
        finally:
            watch.stop()
        check_no_double(run, peer.name)
    release_all(run, [namespace])
    return scheduled / elapsed


def gang_run(run: Run, peer: Peer, limits: tuple[float, int], size: int, devices: int,
             timeout: float) -> float | None:
    """Seconds to place a gang of ``size`` pods of ``devices`` devices each in one rack
    (None when it was not placed within ``timeout``)."""
    namespace = _namespace(run, peer, "gang")
    run.kube.create(RESOURCE_CLAIM_TEMPLATES, _template(GANG_TEMPLATE, devices), namespace)
    run.kube.create(PODGROUPS, {"metadata": {"name": "gang"}, "spec": {
        "schedulingPolicy": {"gang": {"minCount": size}},
        "schedulingConstraints": {"topology": [{"key": names.RACK_LABEL}]}}}, namespace)
    elapsed: float | None = None
    with peer.running(run.server, limits, run.workdir) as process:
        run.ready(peer, process, namespace)
        os.kill(process.pid, signal.SIGSTOP)
        _create_pods(run, namespace, [_pod(f"m{i}", peer.scheduler_name, GANG_TEMPLATE, "gang")
                                      for i in range(size)])
        _wait("the resourceclaim controller did not make the claims",
              lambda: _claims_made(run, namespace, size), 600)
        os.kill(process.pid, signal.SIGCONT)
        try:
            with run.sampled(peer, process, "gang"):
                elapsed = run.wait_bound(namespace, timeout)
        except TimeoutError as error:
            print(f"  {peer.name}: gang not placed: {error}", flush=True)
        check_no_double(run, peer.name)
        if elapsed is not None:
            _check_gang(run, peer, namespace, size, devices)
    release_all(run, [namespace])
    return elapsed


def _check_gang(run: Run, peer: Peer, namespace: str, size: int, devices: int) -> None:
    """Every member bound in one rack, each with ``devices`` devices of its own node."""
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"].get(names.RACK_LABEL)
             for n in run.kube.list("nodes").items}
    pods = run.kube.list("pods", namespace).items
    racks = {nodes[p["spec"]["nodeName"]] for p in pods}
    if len(racks) != 1:
        raise SystemExit(f"{peer.name}: the gang spans racks {sorted(racks)}")
    found = allocations(run)
    for pod in pods:
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        held = [d for s in statuses for d in found.get((namespace, s["resourceClaimName"]), [])]
        if len(held) != devices or {pool for _, pool, _ in held} != {pod["spec"]["nodeName"]}:
            raise SystemExit(f"{peer.name}: member {pod['metadata']['name']} on "
                             f"{pod['spec']['nodeName']} holds {held}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--rack", type=int, default=100, help="nodes per rack")
    parser.add_argument("--init-pods", type=int, default=2500)
    parser.add_argument("--measure-pods", type=int, default=2500)
    parser.add_argument("--steady-count", type=int, default=10)
    parser.add_argument("--steady-seconds", type=float, default=10.0)
    parser.add_argument("--gang", type=int, default=64)
    parser.add_argument("--gang-devices", type=int, default=8)
    parser.add_argument("--gang-timeout", type=float, default=300.0)
    parser.add_argument("--qps", type=float, default=5000.0)
    parser.add_argument("--workloads", default="template,steady,gang")
    parser.add_argument("--baseline", type=Path, help="a checkout: its Fluence runs too")
    parser.add_argument("--tree", type=Path,
                        help="a checkout Fluence runs from (default: the installed one)")
    parser.add_argument("--skip", default="", help="peers to leave out (kube-scheduler,...)")
    parser.add_argument("--profile", type=Path, help="py-spy samples of Fluence go here")
    parser.add_argument("--output", type=Path, default=Path("bench_dra_perf.json"))
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    unknown = set(workloads) - {"template", "steady", "gang"}
    if unknown:
        raise SystemExit(f"--workloads: no workload {sorted(unknown)} "
                         "(template, steady, gang)")
    assets, reason = find_assets()
    if assets is None:
        raise SystemExit(reason)
    binary = Path(os.environ.get("KUBE_SCHEDULER") or assets / "kube-scheduler")
    limits = (args.qps, int(args.qps))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, \
            start_apiserver(assets, Path(tmp), controller_manager=True,
                            controller_manager_flags=CONTROLLER_LIMITS) as server:
        run = Run(server, 0, Path(tmp))
        run.nodes = args.nodes
        if args.profile:
            run.profile_dir = args.profile
            args.profile.mkdir(parents=True, exist_ok=True)
        _in_parallel(lambda i: run.kube.create("nodes", _node(i, args.rack)),
                     list(range(args.nodes)))
        run.kube.create(DEVICE_CLASSES, make_device_class_dict(
            CLASS, f'device.driver == "{DRIVER}"'))
        _in_parallel(lambda i: run.kube.create(RESOURCE_SLICES, _slice(node_name(i),
                                                                        args.devices)),
                     list(range(args.nodes)))
        kubeconfig = server.kubeconfig()
        peers = [kube_scheduler_peer(binary, kubeconfig),
                 fluence_peer(kubeconfig, tree=args.tree)]
        if args.baseline is not None:
            peers.append(fluence_peer(kubeconfig, "before", args.baseline))
        peers = [p for p in peers if p.name not in args.skip.split(",")]
        for workload in workloads:
            row: dict[str, Any] = {"nodes": args.nodes, "devices": args.devices,
                                   "workload": workload}
            for peer in peers:
                if workload == "template":
                    value: float | None = template_run(run, peer, limits, args.init_pods,
                                                       args.measure_pods)
                elif workload == "steady":
                    value = steady_run(run, peer, limits, args.steady_count,
                                       args.steady_seconds)
                else:
                    value = gang_run(run, peer, limits, args.gang, args.gang_devices,
                                     args.gang_timeout)
                row[peer.name] = value
                print(f"  {workload} {args.nodes} nodes: {peer.name} "
                      f"{'not placed' if value is None else f'{value:.2f}'}"
                      f"{' s' if workload == 'gang' else ' pods/s'}", flush=True)
            rows.append(row)
            _print_row(row)
            args.output.write_text(json.dumps(rows, indent=2))


def _print_row(row: dict[str, Any]) -> None:
    """The row with each Fluence's ratio to kube-scheduler (higher is better: pods/s, or
    kube-scheduler's seconds over Fluence's for the gang)."""
    base = row.get("kube-scheduler")
    parts = []
    for name in ("kube-scheduler", "fluence", "before"):
        if name not in row:
            continue
        value = row[name]
        text = "not placed" if value is None else f"{value:.2f}"
        if name != "kube-scheduler" and value and base:
            ratio = base / value if row["workload"] == "gang" else value / base
            text += f" ({ratio:.2f}x)"
        parts.append(f"{name} {text}")
    unit = "s to place" if row["workload"] == "gang" else "pods/s"
    print(f"{row['workload']:8} {row['nodes']:5d} nodes ({unit}): " + ", ".join(parts),
          flush=True)


if __name__ == "__main__":
    main()
