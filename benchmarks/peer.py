"""Fluence beside kube-scheduler on one real API server: ``bench_scheduler.py --peer``.

For each node count, a fresh etcd + kube-apiserver (KUBEBUILDER_ASSETS) gets
that many fake nodes (16 cpu, 64Gi, 110 pods). Then for each client limit
(the schedulers' defaults, 50 QPS / burst 100, and 5,000 / 5,000) and each
workload (1,000 single pods of 1 cpu; 50 gangs of 20), each scheduler runs as
its own process, exactly as a user runs it:

1. started with equal client limits, and shown ready by binding a probe pod;
2. paused (SIGSTOP) while the workload's pods (and PodGroups) are created;
3. resumed (SIGCONT): the clock runs from the resume until the API server answered the
   last binding (read from its audit log, a line per request; a one-item list of
   ``spec.nodeName=`` every 50 ms tells when no pod is left unbound);
4. in the gang rows, once the scheduler's events stopped coming, a gang that can
   never fit is created and the process's CPU seconds per second are read from
   /proc over 10 s while it waits;
5. stopped, and the workload deleted.

kube-scheduler's path comes from ``KUBE_SCHEDULER`` (default
``$KUBEBUILDER_ASSETS/kube-scheduler``); it gets the same feature gates as the
API server and a KubeSchedulerConfiguration with the client limits. Fluence
runs ``python -m fluence_core.cli up`` with FLUENCE_KUBE_QPS/BURST, no leader
election and no metrics port. Each runs with its own defaults otherwise:
kube-scheduler's percentageOfNodesToScore is adaptive (every node of 100, 42 %
of 1,000), and it posts its events through a client of its own, as Fluence
posts them through a token bucket of their own. One table with the ratios is
printed and the rows are written as JSON. With ``--audit``, each scenario also
prints each scheduler's requests per pod and when its bindings arrived.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import audit
from fluence_core.testing_apiserver import (
    FEATURE_GATES,
    ApiServer,
    ensure_namespace,
    start_apiserver,
    stop_process,
)

LIMITS = {"default": (50.0, 100), "5000 QPS": (5000.0, 5000)}
WORKLOADS = {"1000 single pods": (1000, 0), "50 gangs of 20": (0, 50)}
GANG_SIZE = 20
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    nodes: int
    limits: str
    workload: str
    kube_scheduler_pods_s: float
    fluence_pods_s: float
    ratio: float
    kube_scheduler_waiting_cores: float | None = None
    fluence_waiting_cores: float | None = None
    before_pods_s: float | None = None
    """Fluence at the baseline commit (``--baseline``), in the same run."""
    before_ratio: float | None = None
    before_waiting_cores: float | None = None


def _node(i: int) -> dict[str, Any]:
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {"metadata": {"name": f"peer-{i}", "labels": {"kubernetes.io/hostname": f"peer-{i}"}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str, scheduler: str | None, group: str | None, cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "resources": {
        "requests": {"cpu": cpu, "memory": "100Mi"}}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name}, "spec": spec}


def _pod_group(name: str, size: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}}


def _in_parallel(action: Callable[[Any], Any], items: list[Any], threads: int = 16) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(action, items))


def delete_workload(kube: Any, namespace: str) -> None:
    """Delete the pods (at once, in parallel) and PodGroups of ``namespace``: no namespace
    controller runs beside these benchmarks' API servers to do it."""
    names = [p["metadata"]["name"] for p in kube.list("pods", namespace).items]
    _in_parallel(lambda n: kube.delete("pods", n, namespace, grace_period_seconds=0), names)
    for group in kube.list("podgroups", namespace).items:
        kube.delete("podgroups", group["metadata"]["name"], namespace)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (all threads)


class Peer:
    """One scheduler as a process: how to start it and which pods it takes."""

    def __init__(self, name: str, scheduler_name: str | None,
                 command: Callable[[Path, tuple[float, int]], tuple[list[str], dict[str, str]]]):
        self.name = name
        self.scheduler_name = scheduler_name
        self.command = command

    @contextmanager
    def running(self, server: ApiServer, limits: tuple[float, int],
                workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
        argv, env = self.command(workdir, limits)
        with open(workdir / f"{self.name}.log", "ab") as log:
            # the working directory comes first on a Python process's path: use the tree's own
            cwd = env.get("PYTHONPATH", "").split(os.pathsep)[0] or str(workdir)
            process = subprocess.Popen(argv, env={**os.environ, **env}, stdout=log, stderr=log,
                                       cwd=cwd)
            try:
                yield process
            finally:
                os.kill(process.pid, signal.SIGCONT)
                stop_process(process)


def fluence_peer(kubeconfig: Path, name: str = "fluence", tree: Path | None = None,
                 extra_env: dict[str, str] | None = None) -> Peer:
    """``fluence up``; from ``tree`` (a checkout, first on PYTHONPATH and the working
    directory) when given; ``extra_env`` on top of this process's environment (the matcher
    it runs, for one)."""
    def command(workdir: Path, limits: tuple[float, int]) -> tuple[list[str], dict[str, str]]:
        env = {"KUBECONFIG": str(kubeconfig), "FLUENCE_KUBE_QPS": str(limits[0]),
               "FLUENCE_KUBE_BURST": str(limits[1]), "FLUENCE_LEADER_ELECT": "false",
               "FLUENCE_METRICS_PORT": "0", **(extra_env or {})}
        if tree is not None:  # the tree's own plugins too, ahead of the installed ones
            plugins = sorted(str(p) for p in (tree / "plugins").glob("*") if p.is_dir())
            env["PYTHONPATH"] = os.pathsep.join([str(tree), *plugins])
        return [sys.executable, "-m", "fluence_core.cli", "up"], env
    return Peer(name, "fluence", command)


def kube_scheduler_peer(binary: Path, kubeconfig: Path) -> Peer:
    def command(workdir: Path, limits: tuple[float, int]) -> tuple[list[str], dict[str, str]]:
        config = workdir / "kube-scheduler.yaml"
        config.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"clientConnection:\n  kubeconfig: {kubeconfig}\n  qps: {limits[0]}\n"
            f"  burst: {limits[1]}\nleaderElection:\n  leaderElect: false\n")
        return ([str(binary), f"--config={config}", f"--feature-gates={FEATURE_GATES}",
                 "--secure-port=0", "-v=0"], {})
    return Peer("kube-scheduler", None, command)


class Run:
    """One API server with its nodes, where peers take turns."""

    def __init__(self, server: ApiServer, nodes: int, workdir: Path,
                 audit_log: Path | None = None) -> None:
        self.server = server
        self.kube = server.cluster(qps=5000, burst=5000, user_agent=audit.BENCH_AGENT)
        self.nodes = nodes
        self.workdir = workdir
        self.audit_log = audit_log
        """Where the API server writes its audit log: the clock stops at the answer to the
        last binding."""
        self.show_requests = False
        """Print each scheduler's requests in each scenario (``--audit``)."""
        self.profile_dir: Path | None = None
        self.profile_seconds = 0
        _in_parallel(lambda i: self.kube.create("nodes", _node(i)), list(range(nodes)))

    def unbound(self, namespace: str) -> bool:
        # a one-item page is enough to know whether any pod still waits
        page = self.kube._call("GET", f"/api/v1/namespaces/{namespace}/pods", query={
            "fieldSelector": "spec.nodeName=", "limit": 1})
        return bool(page.get("items"))

    def wait_bound(self, namespace: str, timeout: float) -> float:
        started = time.perf_counter()
        while self.unbound(namespace):
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"pods in {namespace} still unbound after {timeout:.0f} s")
            time.sleep(0.05)
        return time.perf_counter() - started

    def ready(self, peer: Peer, process: subprocess.Popen[bytes], namespace: str) -> None:
        """Bind a probe pod: the scheduler has listed and is watching."""
        self.kube.create("pods", _pod("probe", peer.scheduler_name, None), namespace)
        try:
            self.wait_bound(namespace, 120)
        except TimeoutError:
            raise SystemExit(f"{peer.name} bound no probe pod; see {self.workdir}") from None
        self.kube.delete("pods", "probe", namespace, grace_period_seconds=0)

    def scenario(self, peer: Peer, limits: str, workload: str) -> tuple[float, float | None]:
        singles, gangs = WORKLOADS[workload]
        namespace = f"{peer.name}-{int(time.time() * 1000) % 10**8}"
        ensure_namespace(self.kube, namespace)
        with peer.running(self.server, LIMITS[limits], self.workdir) as process:
            self.ready(peer, process, namespace)
            os.kill(process.pid, signal.SIGSTOP)
            pods = [_pod(f"single-{i}", peer.scheduler_name, None) for i in range(singles)]
            for g in range(gangs):
                self.kube.create("podgroups", _pod_group(f"gang-{g}", GANG_SIZE), namespace)
                pods += [_pod(f"gang-{g}-{m}", peer.scheduler_name, f"gang-{g}")
                         for m in range(GANG_SIZE)]
            _in_parallel(lambda p: self.kube.create("pods", p, namespace), pods)
            resumed = time.time()
            os.kill(process.pid, signal.SIGCONT)
            with self.sampled(peer, process, f"{limits}-{workload}"):
                elapsed = self.wait_bound(namespace, 600)
            if self.audit_log is not None:
                requests = audit.summarise(self.audit_log, namespace, resumed, len(pods))
                elapsed = requests.last_bound or elapsed
                if self.show_requests:
                    print(f"  {peer.name}, {limits}, {workload}: {len(pods) / elapsed:.1f} "
                          "pods/s", flush=True)
                    print("\n".join(requests.lines()), flush=True)
            rate = len(pods) / elapsed
            waiting = (self.waiting_gang_cores(peer, process, namespace,
                                               f"{limits}-{workload}-waiting")
                       if gangs else None)
        delete_workload(self.kube, namespace)
        return rate, waiting

    @contextmanager
    def sampled(self, peer: Peer, process: subprocess.Popen[bytes], name: str) -> Iterator[None]:
        """With ``profile_dir`` set, py-spy samples Fluence (threads holding the GIL) while
        the block runs (from just after the resume, or while a gang waits), or for
        ``profile_seconds``."""
        if self.profile_dir is None or peer.scheduler_name != "fluence":
            yield
            return
        output = self.profile_dir / f"{peer.name}-{self.nodes}-{name.replace(' ', '_')}.txt"
        argv = ["py-spy", "record", "--pid", str(process.pid), "--gil", "--threads",
                "--rate", "250", "--format", "raw", "--output", str(output)]
        if self.profile_seconds:
            argv += ["--duration", str(self.profile_seconds)]
        spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            yield
        finally:
            if spy.poll() is None and not self.profile_seconds:
                spy.send_signal(signal.SIGINT)
            spy.wait(60)

    def waiting_gang_cores(self, peer: Peer, process: subprocess.Popen[bytes],
                           namespace: str, label: str) -> float:
        """CPU seconds per second of the scheduler while a gang that cannot fit waits.

        Measured once the scheduler's events about the workload are all posted (both post
        them after the bindings, from a queue): what waiting costs, not the tail of the
        burst before it.
        """
        self.quiet_events(namespace)
        self.kube.create("podgroups", _pod_group("unfit", 2), namespace)
        for m in range(2):
            self.kube.create("pods", _pod(f"unfit-{m}", peer.scheduler_name, "unfit", cpu="64"),
                             namespace)
        time.sleep(3)
        before, started = _cpu_seconds(process.pid), time.perf_counter()
        with self.sampled(peer, process, label):
            time.sleep(10)
        return (_cpu_seconds(process.pid) - before) / (time.perf_counter() - started)

    def quiet_events(self, namespace: str, timeout: float = 120.0) -> None:
        """Wait until the namespace's Events stopped growing for two seconds."""
        deadline = time.monotonic() + timeout
        counts = [-3, -2, -1]
        while counts[-1] != counts[-2] or counts[-2] != counts[-3]:
            if time.monotonic() > deadline:
                print(f"  (events in {namespace} still growing after {timeout:.0f} s)")
                return
            time.sleep(1.0)
            counts.append(len(self.kube.list("events", namespace).items))


def run_peer(assets: Path, node_counts: list[int], output: Path, *, audited: bool = False,
             limits_names: list[str] | None = None,
             workload_names: list[str] | None = None,
             baseline: Path | None = None) -> list[Row]:
    """Every row (or those of the named limits and workloads), printed as it is measured and
    written to ``output`` after each; with ``audited``, each scenario's requests from the API
    server's audit log as well; with ``baseline`` (a checkout), Fluence from there takes its
    turn too."""
    for name in (limits_names or []) + (workload_names or []):
        if name not in LIMITS and name not in WORKLOADS:
            raise SystemExit(f"no limits or workload named {name!r}: "
                             f"choose from {list(LIMITS)} and {list(WORKLOADS)}")
    binary = Path(os.environ.get("KUBE_SCHEDULER") or assets / "kube-scheduler")
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"no kube-scheduler at {binary} (set KUBE_SCHEDULER)")
    rows: list[Row] = []
    for nodes in node_counts:
        with tempfile.TemporaryDirectory() as tmp, \
                start_apiserver(assets, Path(tmp), controller_manager=False,
                                apiserver_flags=audit.flags(Path(tmp))) as server:
            run = Run(server, nodes, Path(tmp), Path(tmp) / "audit.log")
            run.show_requests = audited
            if os.environ.get("PEER_PROFILE"):  # a folder: py-spy samples of each Fluence run
                run.profile_dir = Path(os.environ["PEER_PROFILE"])
                run.profile_dir.mkdir(parents=True, exist_ok=True)
                run.profile_seconds = int(os.environ.get("PEER_PROFILE_SECONDS") or 0)
            kubeconfig = server.kubeconfig()
            peers = [kube_scheduler_peer(binary, kubeconfig), fluence_peer(kubeconfig)]
            if baseline is not None:
                peers.append(fluence_peer(kubeconfig, "before", baseline))
            for limits in limits_names or LIMITS:
                for workload in workload_names or WORKLOADS:
                    results = {p.name: run.scenario(p, limits, workload) for p in peers}
                    (ks, ks_cpu), (fl, fl_cpu) = results["kube-scheduler"], results["fluence"]
                    row = Row(nodes, limits, workload, ks, fl, fl / ks, ks_cpu, fl_cpu)
                    if "before" in results:
                        row.before_pods_s, row.before_waiting_cores = results["before"]
                        row.before_ratio = row.before_pods_s / ks
                    rows.append(row)
                    _print_row(row)
                    output.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return rows


def _print_row(row: Row) -> None:
    waiting = ""
    if row.fluence_waiting_cores is not None:
        waiting = (f"  waiting gang: kube-scheduler {row.kube_scheduler_waiting_cores:.3f}, "
                   f"fluence {row.fluence_waiting_cores:.3f} cores")
        if row.before_waiting_cores is not None:
            waiting += f" (before {row.before_waiting_cores:.3f})"
    before = ""
    if row.before_pods_s is not None and row.before_ratio is not None:
        before = f"  [before: {row.before_pods_s:7.1f} pods/s {row.before_ratio:6.3f}x]"
    print(f"{row.nodes:5d} nodes  {row.limits:9} {row.workload:17} "
          f"kube-scheduler {row.kube_scheduler_pods_s:7.1f}  fluence {row.fluence_pods_s:7.1f} "
          f"pods/s  {row.ratio:6.3f}x{before}{waiting}", flush=True)
