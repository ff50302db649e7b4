"""A burst of grouped Jobs created through Fluence's webhook on a real API server.

What a workload of many gangs pays at admission (issue 20): ``--jobs`` Indexed Jobs
of ``--size`` pods, each its own group (the group label on the pod template), are
created by 1 and by 20 concurrent clients in a namespace without any webhook, then in
one served by Fluence's webhook as ``fluence webhook`` runs it (the built-in handlers
and plugins, the background writer, the informers, its own rate-limited API client,
the generated matchConditions). Reported for each: how long until every Job was
admitted and the Jobs/s ratio against the namespace without the webhook (same run),
how long until every Job's PodGroup existed, and the API calls the webhook made per
Job, by verb and kind.

``--baseline REF`` runs the webhook a second time with Fluence as it was at git REF
(a temporary worktree; this script's code drives that tree's modules, so REF must
have ``fluence_core.testing_apiserver.webhook_beside``): both in one run.

The clients run in a process of their own (plain HTTPS, one connection each), the
webhook in another, so neither takes the other's interpreter lock. No
kube-controller-manager runs: the Jobs make no pods, and only their admission is
measured.

    python benchmarks/bench_job_burst.py
    python benchmarks/bench_job_burst.py --jobs 500 --baseline main~5
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from baseline import baseline_tree
from fluence_core import names

CLIENTS = (1, 20)


def job_body(name: str, size: int) -> bytes:
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                       "spec": {"completionMode": "Indexed", "completions": size,
                                "parallelism": size, "template": {
                                    "metadata": {"labels": {names.GROUP_LABEL: name}},
                                    "spec": {"schedulerName": names.SCHEDULER_NAME,
                                             "restartPolicy": "Never",
                                             "containers": [{"name": "c",
                                                             "image": "busybox"}]}}}}).encode()


def create_jobs(url: str, token: str, ca_file: str, namespace: str, clients: int, jobs: int,
                size: int, prefix: str) -> tuple[float, list[str]]:
    """Seconds ``clients`` threads took to create ``jobs`` Jobs, and the errors (in a process
    of its own), each on a keep-alive connection of :class:`bench_webhook.ApiClient`."""
    import ssl

    from bench_webhook import ApiClient

    context = ssl.create_default_context(cafile=ca_file)
    todo = iter(range(jobs))
    lock = threading.Lock()
    errors: list[str] = []
    connections = [ApiClient(url, token, context) for _ in range(clients)]
    for api in connections:  # the handshake is not a create's cost
        api.conn.connect()

    def client(api: ApiClient) -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            status, answer = api.create(namespace, job_body(f"{prefix}-{i}", size),
                                        plural="jobs")
            if status != 201:
                with lock:
                    errors.append(f"{status}: {answer.get('message')}")

    threads = [threading.Thread(target=client, args=(api,)) for api in connections]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, errors


class Counting:
    """The webhook's API client, counting each call by verb and kind."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def __getattr__(self, verb: str) -> Any:
        method = getattr(self.inner, verb)
        if not callable(method):
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            kind = getattr(args[0], "plural", args[0]) if args else ""
            with self._lock:
                self.calls[f"{verb} {kind}"] += 1
            return method(*args, **kwargs)
        return counted


def child(args: argparse.Namespace) -> None:
    """One path, in a process whose ``fluence_core`` may be another tree's: print its JSON."""
    from fluence_core.kube.client import KubeCluster
    from fluence_core.log import configure
    from fluence_core.settings import load_settings
    from fluence_core.testing_apiserver import ensure_namespace

    configure("WARNING")
    admin = KubeCluster.from_token(args.url, args.token, ca_file=args.ca, qps=1000, burst=1000)
    results = []
    for clients in CLIENTS:
        namespace = ensure_namespace(admin, f"{args.label}-c{clients}")
        if args.path == "plain":
            results.append(measure(args, admin, namespace, clients, None))
            continue
        settings = load_settings(webhook_config=f"bench-{namespace}")
        webhook_api = Counting(KubeCluster.from_token(
            args.url, args.token, ca_file=args.ca, qps=settings.kube.qps,
            burst=settings.kube.burst))
        results.append(through_webhook(args, admin, webhook_api, settings, namespace, clients))
    print(json.dumps(results))


def through_webhook(args: argparse.Namespace, admin: Any, webhook_api: Counting, settings: Any,
                    namespace: str, clients: int) -> dict[str, Any]:
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.testing_apiserver import webhook_beside
    from fluence_core.webhook import BackgroundWriter, build_service

    extra: dict[str, Any] = {}
    informers: list[Any] = []
    try:  # the informers (issue 20); a baseline before them reads instead
        from fluence_core.webhook.controller.informer import watched_for
    except ImportError:
        pass
    else:
        watched = watched_for(webhook_api.inner)
        extra["watched"], informers = watched, watched.informers()
    service = build_service(settings, get_plugin_manager(settings), webhook_api,
                            writer=BackgroundWriter(), **extra)
    workdir = Path(tempfile.mkdtemp(prefix="bench-job-burst-"))
    with webhook_beside(admin, settings, workdir, namespace=namespace,
                        resources=("pods", "jobs"), service=service, loops=informers,
                        match_conditions=True):
        for informer in informers:
            informer.wait_synced(30)
        wait_called(args, namespace)
        webhook_api.calls.clear()
        return measure(args, admin, namespace, clients, webhook_api)


def wait_called(args: argparse.Namespace, namespace: str) -> None:
    """Until the API server sends the namespace's Jobs to the webhook (a dry run shows the
    group named on the template)."""
    import ssl

    from bench_webhook import ApiClient

    api = ApiClient(args.url, args.token, ssl.create_default_context(cafile=args.ca))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, answer = api.create(namespace, job_body("probe", args.size), dry_run=True,
                                    plural="jobs")
        template = ((answer.get("spec") or {}).get("template") or {}).get("spec") or {}
        if status == 201 and template.get("schedulingGroup"):
            return
        time.sleep(0.2)
    raise SystemExit(f"the API server never sent {namespace}'s Jobs to the webhook")


def measure(args: argparse.Namespace, admin: Any, namespace: str, clients: int,
            webhook_api: Counting | None) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        started = time.monotonic()
        took, errors = pool.apply(create_jobs, (args.url, args.token, args.ca, namespace,
                                                clients, args.jobs, args.size, "j"))
    result: dict[str, Any] = {"clients": clients, "seconds": took, "errors": errors[:5],
                              "error_count": len(errors)}
    if webhook_api is not None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if len(admin.list("podgroups", namespace).items) >= args.jobs - len(errors):
                result["podgroups_after"] = time.monotonic() - started
                break
            time.sleep(0.05)
        result["calls"] = dict(webhook_api.calls)
    return result


def run_path(path: str, label: str, args: argparse.Namespace, apiserver: Any,
             tree: Path | None) -> list[dict[str, Any]]:
    """One path in a child process (``label`` names its namespaces)."""
    env = dict(os.environ)
    if tree is not None:  # that tree's fluence_core first, this script's code driving it
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", path, "--label", label,
            "--url",
            apiserver.url, "--token", apiserver.token, "--ca", str(apiserver.ca_file),
            "--jobs", str(args.jobs), "--size", str(args.size)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"path {path} failed:\n{done.stderr[-3000:]}")
    result: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    from fluence_core.testing_apiserver import find_assets, start_apiserver

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="Jobs per burst")
    parser.add_argument("--size", type=int, default=4, help="pods per Job (its gang)")
    parser.add_argument("--baseline", metavar="REF", default=None,
                        help="also run the webhook of Fluence at git REF")
    parser.add_argument("--json", type=Path, default=Path("bench-job-burst.json"))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.path = args.child
        child(args)
        return
    assets, reason = find_assets()
    if assets is None:
        print(f"skipped: {reason}")
        return
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": os.getloadavg(),
                              "jobs": args.jobs, "size": args.size, "paths": {}}
    workdir = Path(tempfile.mkdtemp(prefix="bench-job-burst-"))
    with baseline_tree(args.baseline) as base:
        trees: dict[str, Path | None] = {"plain": None, "fluence": None}
        if base is not None:
            trees[f"fluence@{args.baseline}"] = base
        with start_apiserver(assets, workdir / "apiserver", controller_manager=False) as api:
            for index, (path, tree) in enumerate(trees.items()):
                report["paths"][path] = run_path(path.split("@")[0], f"p{index}", args, api,
                                                 tree)
    report["load_after"] = os.getloadavg()
    print_table(report)
    args.json.write_text(json.dumps(report, indent=1))
    print(f"figures written to {args.json}")


def print_table(report: dict[str, Any]) -> None:
    print(f"{report['jobs']} grouped Jobs of {report['size']} created at once, through"
          " kube-apiserver, against the namespace without a webhook")
    print("| clients | path | admitted in | Jobs/s | x without | all PodGroups after |"
          " webhook API calls per Job | errors |")
    print("|---|---|---|---|---|---|---|---|")
    plain = {row["clients"]: row for row in report["paths"]["plain"]}
    for path, rows in report["paths"].items():
        for row in rows:
            rate = report["jobs"] / row["seconds"]
            ratio = plain[row["clients"]]["seconds"] / row["seconds"]
            calls = ", ".join(f"{verb} {count / report['jobs']:.2f}"
                              for verb, count in sorted((row.get("calls") or {}).items()))
            podgroups = (f"{row['podgroups_after']:.2f} s" if "podgroups_after" in row
                         else "-" if path == "plain" else "not all in 300 s")
            print(f"| {row['clients']} | {path} | {row['seconds']:.2f} s | {rate:.0f} |"
                  f" {ratio:.2f}x | {podgroups} | {calls or '-'} | {row['error_count']} |")
    print("load averages (1, 5, 15 min): before"
          f" {[round(x, 2) for x in report['load_before']]}, after"
          f" {[round(x, 2) for x in report['load_after']]} on {report['cpus']} CPUs")


if __name__ == "__main__":
    main()
