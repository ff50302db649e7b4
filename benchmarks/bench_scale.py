"""Fluence beside kube-scheduler on scheduler_perf's workload shapes, at scale (issue 31).

    KUBEBUILDER_ASSETS=/usr/local/kubebuilder/bin \\
    KUBE_SCHEDULER=/usr/local/kubebuilder/bin/kube-scheduler \\
        python benchmarks/bench_scale.py --nodes 500,1000 [--pods 2000] \\
            [--workloads basic,gangs3,...] [--qps 5000] [--json bench-scale.json] \\
            [--matchers embedded,fluxion] [--fluxion-lib PATH] \\
            [--create-threads 16] [--apiserver-flag=--max-requests-inflight=800 ...] \\
            [--etcd-flag=--quota-backend-bytes=8589934592 ...]

For each node count a fresh etcd + kube-apiserver (with an audit log) gets that
many fake nodes shaped like scheduler_perf's default node (4 CPUs, or
``--node-cpu``; 32Gi, 110 pods), spread over three zones. Then, for each
workload, each scheduler runs as its own process with the same client limits
(``--qps``, burst equal), exactly as ``benchmarks/peer.py`` runs them, in backlog
mode:

1. started, shown ready by binding a probe pod; the workload's own set-up (the
   low-priority pods preemption needs) is placed by the same scheduler;
2. paused (SIGSTOP) while the workload's pods (and PodGroups) are created;
3. resumed (SIGCONT); the clock runs until the API server answered the last
   binding (from its audit log).

The mixed workload is a stream instead: the pods arrive at a steady rate while
the scheduler runs, and the clock runs from the first creation.

Workloads (pods are scheduler_perf's default pod: 100m CPU, 500Mi, unless said):

* ``basic``: SchedulingBasic, ``--pods`` single pods;
* ``gangs3``: ``--pods / 3`` PodGroups of minCount 3;
* ``gang1000``: one PodGroup of 1,000 pods;
* ``spread``: TopologySpreading, each pod spread over the zones (maxSkew 1,
  DoNotSchedule);
* ``antiaffinity``: required pod anti-affinity on the hostname, half as many
  pods as nodes;
* ``preemption``: every node filled with low-priority 1-CPU pods (grace 0),
  then ``nodes / 4`` high-priority 1-CPU pods, each needing one evicted;
* ``mixed``: a stream of singles, gangs of 3 and gangs of 8 at 100 pods/s for
  ``--pods`` pods.

Fluence runs once per matcher of ``--matchers`` (``fluence-embedded``,
``fluence-fluxion``: the embedded matcher with the Fluxion plugin blocked, or
flux-sched's ``libreapi_cli`` from ``--fluxion-lib``, by default
``FLUENCE_FLUXION_LIB``), each a scheduler of its own beside kube-scheduler.

Per scheduler and workload it reports pods/s; the first-bind delay (from the
resume, or the stream's first creation, to the first binding the API server
answered); per gang (a single pod is a gang
of one) p50 and p99 of the time from its first member's arrival (the resume, or
its creation in a stream) to its last member's binding; the scheduler's CPU
seconds over the timed window; its peak RSS (VmHWM, whole life); its API
requests per pod (every request of its user agents in the window, watches
included); and the API server's and etcd's CPU over the same window, in cores:
near 2 on this 2-core machine, the API server is the ceiling for both. The audit
log costs the API server some CPU; both schedulers pay it alike. Rows print as
they come, a side-by-side table at the end, and all of it goes to ``--json``.

For a run at many nodes, what limits each scheduler is in each row too: its
cores over the window (near 1 for a Python scheduler is its one interpreter
lock), and the peak RSS of kube-apiserver and etcd with etcd's database size.
The nodes are made by ``--create-threads`` clients, and the time that took is
printed; ``--apiserver-flag`` and ``--etcd-flag`` (repeatable) reach those
processes' command lines (inflight limits, the backend quota).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import audit  # noqa: E402
from baseline import baseline_tree  # noqa: E402
from peer import (  # noqa: E402
    Peer, _in_parallel, delete_workload, fluence_peer, kube_scheduler_peer,
)

from fluence_core.kube.client import KubeCluster  # noqa: E402
from fluence_core.testing_apiserver import (  # noqa: E402
    ApiServer, ensure_namespace, find_assets, start_apiserver,
)

TICK = os.sysconf("SC_CLK_TCK")
ZONES = 3
ZONE_LABEL = "topology.kubernetes.io/zone"
STREAM_RATE = 100.0
"""Pods a second the mixed workload creates."""
STREAM_CLIENTS = 8
"""Threads creating the stream's pods, so that one slow request does not slow the stream."""
TIMEOUT = 1800.0


# -- objects ------------------------------------------------------------------------------

def _node(i: int, cpu: int = 4) -> dict[str, Any]:
    capacity = {"cpu": str(cpu), "memory": "32Gi", "pods": "110"}
    name = f"node-{i}"
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  ZONE_LABEL: f"zone-{i % ZONES}"}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str, scheduler: str | None, *, group: str | None = None, cpu: str = "100m",
         memory: str = "500Mi", labels: dict[str, str] | None = None,
         **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "pause", "image": "pause",
                                            "resources": {"requests": {"cpu": cpu,
                                                                       "memory": memory}}}],
                            **spec}
    if scheduler:
        body["schedulerName"] = scheduler
    if group:
        body["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": body}


def _pod_group(name: str, size: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}}


@dataclass
class Batch:
    """What a workload creates: PodGroups and pods, and each pod's gang (its own name when
    alone)."""

    groups: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    gang_of: dict[str, str] = field(default_factory=dict)

    def add(self, pod: dict[str, Any], gang: str | None = None) -> None:
        self.pods.append(pod)
        name = pod["metadata"]["name"]
        self.gang_of[name] = gang or name


def _gangs(scheduler: str | None, count: int, size: int, prefix: str = "g") -> Batch:
    batch = Batch()
    for g in range(count):
        gang = f"{prefix}{g}"
        batch.groups.append(_pod_group(gang, size))
        for m in range(size):
            batch.add(_pod(f"{gang}-{m}", scheduler, group=gang), gang)
    return batch


def basic(scheduler: str | None, nodes: int, pods: int) -> Batch:
    batch = Batch()
    for i in range(pods):
        batch.add(_pod(f"p{i}", scheduler))
    return batch


def gangs3(scheduler: str | None, nodes: int, pods: int) -> Batch:
    return _gangs(scheduler, pods // 3, 3)


def gang1000(scheduler: str | None, nodes: int, pods: int) -> Batch:
    return _gangs(scheduler, 1, 1000)


def spread(scheduler: str | None, nodes: int, pods: int) -> Batch:
    constraint = {"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "spread"}}}
    batch = Batch()
    for i in range(pods):
        batch.add(_pod(f"s{i}", scheduler, labels={"app": "spread"},
                       topologySpreadConstraints=[constraint]))
    return batch


def antiaffinity(scheduler: str | None, nodes: int, pods: int) -> Batch:
    term = {"labelSelector": {"matchLabels": {"color": "green"}},
            "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    batch = Batch()
    for i in range(min(pods, nodes // 2)):
        batch.add(_pod(f"a{i}", scheduler, labels={"color": "green"}, affinity=affinity))
    return batch


def preemption(scheduler: str | None, nodes: int, pods: int) -> Batch:
    batch = Batch()
    for i in range(max(1, nodes // 4)):
        batch.add(_pod(f"high{i}", scheduler, cpu="1", memory="1Gi",
                       priorityClassName="bench-high", terminationGracePeriodSeconds=0))
    return batch


def preemption_setup(scheduler: str | None, nodes: int) -> Batch:
    """Four low-priority 1-CPU pods a node: every CPU taken."""
    batch = Batch()
    for i in range(4 * nodes):
        batch.add(_pod(f"low{i}", scheduler, cpu="1", memory="1Gi",
                       priorityClassName="bench-low", terminationGracePeriodSeconds=0))
    return batch


def mixed(scheduler: str | None, nodes: int, pods: int) -> Batch:
    batch = Batch()
    made, g = 0, 0
    while made < pods:
        kind = g % 3
        if kind == 0:
            batch.add(_pod(f"m{g}", scheduler))
            made += 1
        else:
            size = 3 if kind == 1 else 8
            gang = f"mg{g}"
            batch.groups.append(_pod_group(gang, size))
            for m in range(size):
                batch.add(_pod(f"{gang}-{m}", scheduler, group=gang), gang)
            made += size
        g += 1
    return batch


WORKLOADS: dict[str, Callable[[str | None, int, int], Batch]] = {
    "basic": basic, "gangs3": gangs3, "gang1000": gang1000, "spread": spread,
    "antiaffinity": antiaffinity, "preemption": preemption, "mixed": mixed,
}
STREAMED = {"mixed"}


# -- measuring ------------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


@dataclass
class Result:
    nodes: int
    workload: str
    scheduler: str
    pods: int
    bound: int
    seconds: float
    pods_per_s: float
    first_bind_s: float
    """From the first arrival to the first binding (the backlog's wait before any pod ran)."""
    arrivals_per_s: float
    """Pods a second created (a stream's first to last creation; 0 in backlog mode)."""
    gang_p50: float
    gang_p99: float
    cpu_seconds: float
    peak_rss_mib: float
    api_per_pod: float
    api_by_kind: dict[str, float]
    apiserver_cores: float
    etcd_cores: float
    scheduler_cores: float = 0.0
    """The scheduler's CPU seconds over the timed window, a second."""
    apiserver_rss_mib: float = 0.0
    """kube-apiserver's peak RSS (VmHWM, its whole life so far)."""
    etcd_rss_mib: float = 0.0
    etcd_db_mib: float = 0.0
    """etcd's database file at the window's end (the backend quota bounds it)."""


class AuditReader:
    """The audit log read once, from where the last scenario left off."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open() as log:
            log.seek(self.offset)
            lines = log.readlines()
            self.offset = log.tell()
        return [json.loads(line) for line in lines if line.strip()]


def _stamp(text: str) -> float:
    return audit._seconds(text)


class Bench:
    """One API server with its nodes, where the schedulers take turns."""

    def __init__(self, server: ApiServer, nodes: int, workdir: Path, qps: float,
                 node_cpu: int = 4, threads: int = 16) -> None:
        self.server = server
        self.kube: KubeCluster = server.cluster(qps=5000, burst=5000,
                                                user_agent=audit.BENCH_AGENT)
        self.nodes = nodes
        self.workdir = workdir
        self.limits = (qps, int(qps))
        self.threads = threads
        self.audit = AuditReader(workdir / "audit.log")
        started = time.monotonic()
        _in_parallel(lambda i: self.kube.create("nodes", _node(i, node_cpu)),
                     list(range(nodes)), threads)
        made = time.monotonic() - started
        print(f"{nodes} nodes created in {made:.1f} s ({nodes / max(made, 1e-3):.0f}/s, "
              f"{threads} clients); kube-apiserver {self._rss('kube-apiserver'):.0f} MiB, "
              f"etcd {self._rss('etcd'):.0f} MiB, etcd db {self._etcd_db_mib():.0f} MiB",
              flush=True)
        for name, value in (("bench-low", 10), ("bench-high", 1000)):
            self.kube.create("priorityclasses", {"metadata": {"name": name}, "value": value})

    def unbound(self, namespace: str) -> bool:
        page = self.kube._call("GET", f"/api/v1/namespaces/{namespace}/pods", query={
            "fieldSelector": "spec.nodeName=", "limit": 1})
        return bool(page.get("items"))

    def wait_bound(self, namespace: str, timeout: float = TIMEOUT) -> bool:
        deadline = time.monotonic() + timeout
        while self.unbound(namespace):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def create(self, batch: Batch, namespace: str) -> dict[str, float]:
        """Create the batch's PodGroups, then its pods; each pod's creation time."""
        for group in batch.groups:
            self.kube.create("podgroups", group, namespace)
        created: dict[str, float] = {}

        def one(pod: dict[str, Any]) -> None:
            self.kube.create("pods", pod, namespace)
            created[pod["metadata"]["name"]] = time.time()
        _in_parallel(one, batch.pods, self.threads)
        return created

    def stream(self, batch: Batch, namespace: str) -> dict[str, float]:
        """Create the batch at :data:`STREAM_RATE` pods a second (a gang's PodGroup first).

        Pod ``i`` is handed at ``i / STREAM_RATE`` to one of :data:`STREAM_CLIENTS` threads:
        one client creating pods one after another was slowed by the machine's load, and
        the arrival rate then differed between the two schedulers' turns of one run (the
        stream's pods/s is its arrival rate when the scheduler keeps up). A gang's PodGroup
        is created before its first pod is handed over.
        """
        created: dict[str, float] = {}
        groups = {g["metadata"]["name"]: g for g in batch.groups}

        def one(pod: dict[str, Any]) -> None:
            self.kube.create("pods", pod, namespace)
            created[pod["metadata"]["name"]] = time.time()
        started = time.monotonic()
        with ThreadPoolExecutor(STREAM_CLIENTS) as pool:
            futures = []
            for i, pod in enumerate(batch.pods):
                gang = batch.gang_of[pod["metadata"]["name"]]
                if gang in groups:
                    self.kube.create("podgroups", groups.pop(gang), namespace)
                delay = started + i / STREAM_RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(one, pod))
            for future in futures:
                future.result()
        return created

    def scenario(self, peer: Peer, workload: str, pods: int) -> Result:
        namespace = f"{workload}-{peer.name}-{int(time.time() * 1000) % 10**8}"
        ensure_namespace(self.kube, namespace)
        batch = WORKLOADS[workload](peer.scheduler_name, self.nodes, pods)
        with peer.running(self.server, self.limits, self.workdir) as process:
            self.kube.create("pods", _pod("probe", peer.scheduler_name), namespace)
            if not self.wait_bound(namespace, 300):
                raise SystemExit(f"{peer.name} bound no probe pod; see {self.workdir}")
            self.kube.delete("pods", "probe", namespace, grace_period_seconds=0)
            if workload == "preemption":
                self.create(preemption_setup(peer.scheduler_name, self.nodes), namespace)
                if not self.wait_bound(namespace, TIMEOUT):
                    raise SystemExit(f"{peer.name} did not place the low-priority pods")
            self.audit.entries()  # skip what came before the timed window
            if workload in STREAMED:
                before = self._cpu(process.pid)
                start = time.time()
                created = self.stream(batch, namespace)
            else:
                os.kill(process.pid, signal.SIGSTOP)
                self.create(batch, namespace)
                before = self._cpu(process.pid)
                start = time.time()
                os.kill(process.pid, signal.SIGCONT)
                created = {name: start for name in created_names(batch)}
            done = self.wait_bound(namespace, TIMEOUT)
            end = time.time()
            after = self._cpu(process.pid)
            peak = _peak_rss_mib(process.pid)
        result = self._result(peer, workload, batch, created, start, end, before, after, peak,
                              namespace, done)
        delete_workload(self.kube, namespace)
        return result

    def _rss(self, name: str) -> float:
        process = self.server.processes.get(name)
        return _peak_rss_mib(process.pid) if process is not None else 0.0

    def _etcd_db_mib(self) -> float:
        db = self.workdir / "etcd" / "member" / "snap" / "db"
        return db.stat().st_size / 2**20 if db.exists() else 0.0

    def _cpu(self, pid: int) -> dict[str, float]:
        figures = {"scheduler": _cpu_seconds(pid)}
        for name in ("kube-apiserver", "etcd"):
            process = self.server.processes.get(name)
            if process is not None:
                figures[name] = _cpu_seconds(process.pid)
        return figures

    def _result(self, peer: Peer, workload: str, batch: Batch, created: dict[str, float],
                start: float, end: float, before: dict[str, float], after: dict[str, float],
                peak: float, namespace: str, done: bool) -> Result:
        bound_at: dict[str, float] = {}
        kinds: Counter[str] = Counter()
        for entry in self.audit.entries():
            agent = audit._agent(entry.get("userAgent", ""))
            received = _stamp(entry["requestReceivedTimestamp"])
            if agent == audit.BENCH_AGENT or agent.startswith("kube-apiserver") \
                    or received < start or received > end + 1:
                continue
            ref = entry.get("objectRef") or {}
            resource = ref.get("resource", "?") + (
                "/" + ref["subresource"] if ref.get("subresource") else "")
            kinds[f"{entry.get('verb')} {resource}"] += 1
            if resource == "pods/binding" and entry.get("verb") == "create" \
                    and ref.get("namespace") == namespace \
                    and (entry.get("responseStatus") or {}).get("code", 201) < 300:
                bound_at[ref.get("name", "")] = _stamp(entry["stageTimestamp"])
        mine = {name for name in batch.gang_of}
        binds = [t for name, t in bound_at.items() if name in mine]
        last = max(binds) if binds else end
        first_arrival = min(created.values()) if created else start
        first_bind = (min(binds) - first_arrival) if binds else 0.0
        arriving = (max(created.values()) - first_arrival) if created else 0.0
        seconds = max(1e-3, last - first_arrival)
        gangs: dict[str, list[str]] = {}
        for name, gang in batch.gang_of.items():
            gangs.setdefault(gang, []).append(name)
        latencies = [max(bound_at[m] for m in members) - min(created[m] for m in members)
                     for members in gangs.values()
                     if all(m in bound_at for m in members)]
        window = max(1e-3, end - start)
        total = sum(kinds.values())
        pods = len(batch.pods)
        return Result(
            nodes=self.nodes, workload=workload, scheduler=peer.name, pods=pods,
            bound=len(binds), seconds=round(seconds, 2),
            pods_per_s=round(len(binds) / seconds, 1) if done else 0.0,
            first_bind_s=round(first_bind, 2),
            arrivals_per_s=round(len(created) / arriving, 1) if arriving > 0 else 0.0,
            gang_p50=round(_percentile(latencies, 0.5), 2),
            gang_p99=round(_percentile(latencies, 0.99), 2),
            cpu_seconds=round(after["scheduler"] - before["scheduler"], 1),
            peak_rss_mib=round(peak),
            api_per_pod=round(total / pods, 2),
            api_by_kind={k: round(v / pods, 3) for k, v in kinds.most_common(8)},
            apiserver_cores=round((after.get("kube-apiserver", 0) - before.get(
                "kube-apiserver", 0)) / window, 2),
            etcd_cores=round((after.get("etcd", 0) - before.get("etcd", 0)) / window, 2),
            scheduler_cores=round((after["scheduler"] - before["scheduler"]) / window, 2),
            apiserver_rss_mib=round(self._rss("kube-apiserver")),
            etcd_rss_mib=round(self._rss("etcd")),
            etcd_db_mib=round(self._etcd_db_mib()),
        )


def created_names(batch: Batch) -> list[str]:
    return [pod["metadata"]["name"] for pod in batch.pods]


def _row(r: Result) -> str:
    return (f"{r.nodes:5d} {r.workload:12} {r.scheduler:16} {r.bound:6d}/{r.pods:<6d} "
            f"{r.pods_per_s:8.1f} pods/s{_arrivals(r)}  first bind {r.first_bind_s:5.2f} s  "
            f"gang p50 {r.gang_p50:7.2f} p99 {r.gang_p99:7.2f} s  "
            f"cpu {r.cpu_seconds:7.1f} s ({r.scheduler_cores:.2f} cores)  "
            f"rss {r.peak_rss_mib:6.0f} MiB  "
            f"api {r.api_per_pod:5.2f}/pod  apiserver {r.apiserver_cores:.2f} "
            f"etcd {r.etcd_cores:.2f} cores  apiserver rss {r.apiserver_rss_mib:.0f} "
            f"etcd rss {r.etcd_rss_mib:.0f} db {r.etcd_db_mib:.0f} MiB")


def _arrivals(r: Result) -> str:
    return f" (created at {r.arrivals_per_s:.1f})" if r.arrivals_per_s else ""


def table(results: list[Result]) -> str:
    """Every scheduler of a node count and workload, each against kube-scheduler's run of it."""
    lines = ["| nodes | workload | pods | scheduler | pods/s | / ks | first bind s | "
             "gang p50/p99 s | CPU s | CPU ms/pod | peak RSS MiB | API calls/pod | "
             "API server cores |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    runs: dict[tuple[int, str], dict[str, Result]] = {}
    for r in results:
        runs.setdefault((r.nodes, r.workload), {})[r.scheduler] = r
    for (nodes, workload), by_name in runs.items():
        ks = by_name.get("kube-scheduler")
        for name, r in by_name.items():
            ratio = (f"{r.pods_per_s / ks.pods_per_s:.2f}x"
                     if ks is not None and ks.pods_per_s else "")
            created = f" (created at {r.arrivals_per_s:.1f})" if r.arrivals_per_s else ""
            lines.append(
                f"| {nodes} | {workload} | {r.pods} | {name} | {r.pods_per_s:.1f}{created} | "
                f"{ratio} | {r.first_bind_s:.2f} | {r.gang_p50:.2f}/{r.gang_p99:.2f} | "
                f"{r.cpu_seconds:.1f} | {1000 * r.cpu_seconds / max(r.bound, 1):.2f} | "
                f"{r.peak_rss_mib:.0f} | {r.api_per_pod:.2f} | {r.apiserver_cores:.2f} |")
    return "\n".join(lines)


MATCHERS = ("embedded", "fluxion")


def matcher_env(matcher: str, fluxion_lib: str | None) -> dict[str, str]:
    """The environment that makes ``fluence up`` match on ``matcher``."""
    if matcher == "embedded":
        return {"FLUENCE_DISABLE_PLUGINS": "fluxion"}
    if not fluxion_lib:
        raise SystemExit("--matchers fluxion needs --fluxion-lib (or FLUENCE_FLUXION_LIB)")
    return {"FLUENCE_FLUXION_LIB": fluxion_lib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="500,1000", help="node counts, comma-separated")
    parser.add_argument("--pods", type=int, default=2000,
                        help="pods of basic, gangs3, spread and mixed")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, from {', '.join(WORKLOADS)}")
    parser.add_argument("--node-cpu", type=int, default=4,
                        help="CPUs of each node (scheduler_perf's default node: 4)")
    parser.add_argument("--qps", type=float, default=5000.0,
                        help="both schedulers' client QPS (and burst)")
    parser.add_argument("--schedulers", default="kube-scheduler,fluence",
                        help="kube-scheduler and/or fluence (once per matcher)")
    parser.add_argument("--matchers", default="embedded",
                        help=f"Fluence's matchers, comma-separated, from {', '.join(MATCHERS)}")
    parser.add_argument("--fluxion-lib", default=os.environ.get("FLUENCE_FLUXION_LIB"),
                        help="libreapi_cli.so for --matchers fluxion")
    parser.add_argument("--baseline", help="Fluence at this git ref takes its turn too, as "
                        "'before' (from a worktree of its own)")
    parser.add_argument("--create-threads", type=int, default=16,
                        help="clients creating the nodes and a backlog's pods at once")
    parser.add_argument("--apiserver-flag", action="append", default=[], metavar="FLAG",
                        help="a kube-apiserver flag, as --apiserver-flag=--max-requests-"
                        "inflight=800 (repeatable)")
    parser.add_argument("--etcd-flag", action="append", default=[], metavar="FLAG",
                        help="an etcd flag, as --etcd-flag=--quota-backend-bytes=8589934592 "
                        "(repeatable)")
    parser.add_argument("--json", type=Path, default=Path("bench-scale.json"))
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workloads {unknown}: choose from {list(WORKLOADS)}")
    if args.create_threads < 1:
        raise SystemExit(f"--create-threads must be at least 1, not {args.create_threads}")
    for option, flags in (("--apiserver-flag", args.apiserver_flag),
                          ("--etcd-flag", args.etcd_flag)):
        odd = [f for f in flags if not f.startswith("--")]
        if odd:
            raise SystemExit(f"{option} takes flags that start with --, as "
                             f"{option}=--name=value; not {odd}")
    assets, reason = find_assets()
    if assets is None:
        raise SystemExit(f"needs a real API server: {reason}")
    binary = Path(os.environ.get("KUBE_SCHEDULER") or assets / "kube-scheduler")
    matchers = args.matchers.split(",")
    wrong = [m for m in matchers if m not in MATCHERS]
    if wrong:
        raise SystemExit(f"unknown matchers {wrong}: choose from {list(MATCHERS)}")
    asked = args.schedulers.split(",")
    if "kube-scheduler" in asked and not os.access(binary, os.X_OK):
        raise SystemExit(f"no kube-scheduler at {binary} (set KUBE_SCHEDULER)")
    wanted = [name for name in asked if name != "fluence"]
    if "fluence" in asked:
        wanted += [f"fluence-{m}" for m in matchers]
    results: list[Result] = []
    with baseline_tree(args.baseline) as baseline:
        if baseline is not None:
            wanted += [f"before-{m}" for m in matchers]
        run(args, assets, binary, wanted, baseline, results)
    print(table(results))


def run(args: argparse.Namespace, assets: Path, binary: Path, wanted: list[str],
        baseline: Path | None, results: list[Result]) -> None:
    workloads = args.workloads.split(",")
    for nodes in (int(n) for n in args.nodes.split(",")):
        with tempfile.TemporaryDirectory() as tmp, \
                start_apiserver(assets, Path(tmp), controller_manager=False,
                                apiserver_flags=[*audit.flags(Path(tmp)), *args.apiserver_flag],
                                etcd_flags=args.etcd_flag) as server:
            bench = Bench(server, nodes, Path(tmp), args.qps, args.node_cpu,
                          args.create_threads)
            kubeconfig = server.kubeconfig()
            peers = {"kube-scheduler": kube_scheduler_peer(binary, kubeconfig)}
            for matcher in args.matchers.split(","):
                env = matcher_env(matcher, args.fluxion_lib)
                peers[f"fluence-{matcher}"] = fluence_peer(kubeconfig, f"fluence-{matcher}",
                                                           extra_env=env)
                if baseline is not None:
                    peers[f"before-{matcher}"] = fluence_peer(
                        kubeconfig, f"before-{matcher}", baseline, extra_env=env)
            for workload in workloads:
                for name in wanted:
                    result = bench.scenario(peers[name], workload, args.pods)
                    results.append(result)
                    print(_row(result), flush=True)
                    args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
