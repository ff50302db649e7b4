"""Where a single pod's time goes under a backlog, on a real API server (sampled with py-spy).

    pip install py-spy
    KUBEBUILDER_ASSETS=/path/to/bin python benchmarks/profile_singles.py [--pods 1000]

A fresh API server gets 100 nodes (64 cpu) and ``--pods`` single pods, then
``fluence up`` starts as a user runs it (no leader election, 5,000 QPS) under
``py-spy record --gil`` (every thread, sampled only while it holds the GIL: the
process's Python CPU, not its waiting). When the last pod is
bound, the samples are summed by area of the path (watch decoding, cache,
cycle, match, bind request, events, ...) and by function, and printed with the
pods/s of the run. Repeat it for a before/after pair; the tables are the profile.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fluence_core.testing_apiserver import ensure_namespace, find_assets, start_apiserver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer import _in_parallel

AREAS = [  # first match wins, searched from the innermost frame outwards
    ("watch: read + decode", ("kube.py:_lines", "json/decoder", "kube.py:_watch")),
    ("events", ("events.py",)),
    ("bind request", ("binder.py:_bind_all",)),
    ("record write", ("binder.py:_bind_group",)),
    ("match", ("matcher/",)),
    ("cycle (group, hooks, commit)", ("cycle.py", "groups.py", "pluggy")),
    ("cache (view.handle)", ("view.py",)),
    ("start: list + graph", ("core.py:start",)),
    ("HTTP client", ("urllib3", "kubernetes/client", "http/client", "ssl.py", "socket.py")),
]


def area(stack: list[str]) -> str:
    for frame in reversed(stack):
        for name, needles in AREAS:
            if any(n in frame for n in needles):
                return name
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--report", type=Path,
                        help="only summarise py-spy raw samples already taken (PEER_PROFILE)")
    args = parser.parse_args()
    if args.report:
        report(args.report, args.pods, None, args.top)
        return
    assets, reason = find_assets()
    if assets is None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory() as tmp, \
            start_apiserver(assets, Path(tmp), controller_manager=False) as server:
        kube = server.cluster(qps=5000, burst=5000)
        capacity = {"cpu": "64", "memory": "256Gi", "pods": "1000"}
        _in_parallel(lambda i: kube.create("nodes", {
            "metadata": {"name": f"n{i}"},
            "status": {"capacity": capacity, "allocatable": capacity}}), list(range(100)))
        ensure_namespace(kube, "bench")
        requests = {"cpu": "1", "memory": "100Mi"}
        _in_parallel(lambda i: kube.create("pods", {"metadata": {"name": f"p{i}"}, "spec": {
            "schedulerName": "fluence",
            "containers": [{"name": "c", "image": "busybox",
                            "resources": {"requests": requests}}]}}, "bench"),
            list(range(args.pods)))
        samples = Path(tmp) / "samples.txt"
        env = {**os.environ, "KUBECONFIG": str(server.kubeconfig()),
               "FLUENCE_LEADER_ELECT": "false", "FLUENCE_METRICS_PORT": "0",
               "FLUENCE_KUBE_QPS": "5000", "FLUENCE_KUBE_BURST": "5000"}
        spy = subprocess.Popen(
            ["py-spy", "record", "--gil", "--threads", "--rate", "250", "--format", "raw",
             "--output", str(samples), "--", sys.executable, "-m", "fluence_core.cli", "up"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.perf_counter()
        while any(not p["spec"].get("nodeName") for p in kube.list("pods", "bench").items):
            if time.perf_counter() - started > 600:
                raise SystemExit("pods still unbound after 600 s")
            time.sleep(0.25)
        elapsed = time.perf_counter() - started
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        keep = os.environ.get("PROFILE_SAMPLES")
        if keep:
            Path(keep).write_text(samples.read_text())
        report(samples, args.pods, elapsed, args.top)


def report(samples: Path, pods: int, elapsed: float | None, top: int) -> None:
    by_area: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    total = 0
    for line in samples.read_text().splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        frames = [_frame(f) for f in stack_text.split(";")]
        if not frames:
            continue
        count = int(count_text)
        total += count
        by_area[area(frames)] += count
        by_function[frames[-1]] += count
    if elapsed is not None:
        print(f"{pods} single pods bound in {elapsed:.2f} s = {pods / elapsed:.1f} pods/s "
              f"(wall, includes fluence up's start)")
    print(f"{total} busy samples (a thread holding the GIL)")
    print("by area (innermost match):")
    for name, count in by_area.most_common():
        print(f"  {name:32} {100 * count / total:5.1f} %")
    print(f"top {top} functions by own samples:")
    for name, count in by_function.most_common(top):
        print(f"  {100 * count / total:5.1f} %  {name}")


def _frame(text: str) -> str:
    """``function (path/file.py:line)`` -> ``file.py:function`` (with the folder for libraries)."""
    function, _, where = text.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else path
    return f"{short}:{function}"


if __name__ == "__main__":
    main()
