"""``fluence webhook`` as deployed, in a process of its own, for bench_webhook.py to measure.

Run by the interpreter of the tree being measured (this tree's, or a baseline worktree's own
venv, ``baseline.baseline_python``), so every module it serves with is that tree's: its
``make_server`` builds the service, informers, controller, writer, loops and server exactly
as ``fluence webhook`` does there. It touches only what both old and new trees have:
``load_settings``, ``tls.generate``, ``webhook.main.make_server`` and the cluster client
(``fluence_core.kube.client`` now, ``fluence_core.kube`` before the ``kube/`` package).

    python webhook_process.py URL TOKEN CA_FILE WORKDIR NAMESPACE

It prints one JSON line, ``{"port": ..., "ca": ...}``, once serving; then answers each line
on stdin with one JSON line of its figures (CPU seconds so far, the seconds of each review
since the last line, connections accepted so far, seconds its threads waited for a CPU,
its API calls and watch events so far by method and kind);
it exits when stdin closes. The webhook configuration it would publish matchConditions to
does not exist: the benchmark registers the webhook itself, as ``deploy/`` does.

What it lists and watches across namespaces (its informers, the controller's, the sweeps)
is of ``NAMESPACE`` alone (:class:`OneNamespace`): the run's other paths create pods and
PodGroups in their own namespaces on the same API server, and a deployed webhook would act
on them (make the PodGroups of the pods the ``patched`` path points at groups, say).
"""

from __future__ import annotations

import inspect
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any


def run_queue_wait(pid: int | str = "self") -> float:
    """Seconds the threads of process ``pid`` (those alive now) have waited for a CPU while
    ready to run (Linux ``/proc/<pid>/task/*/schedstat``; 0 elsewhere): on a shared machine,
    the latency no code of ours can remove."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):  # the thread ended meanwhile
            continue
    return total / 1e9


def time_reviews(service: Any) -> list[float]:
    """Wrap ``service.review`` so that each review's wall seconds inside the webhook are
    appended to the list returned (failed reviews too); the caller takes them from it."""
    reviews: list[float] = []
    review = service.review

    def timed(body: bytes) -> Any:
        started = time.perf_counter()
        try:
            return review(body)
        finally:
            reviews.append(time.perf_counter() - started)

    service.review = timed
    return reviews


def take(reviews: list[float]) -> list[float]:
    """The seconds :func:`time_reviews` recorded since the last take, taken out of the list
    (reviews still being answered append behind what is taken)."""
    taken = reviews[:]
    del reviews[:len(taken)]
    return taken


def resolve(resource: Any) -> Any:
    try:
        from fluence_core.kube.api import resolve as resolved
    except ImportError:  # a tree from before the kube/ package
        from fluence_core.cluster_api import resolve as resolved  # type: ignore[no-redef]
    return resolved(resource)


CALLS = ("get", "list", "watch", "create", "patch", "update", "delete", "replace")
"""The client's methods that call the API server, counted by :class:`OneNamespace`."""


class OneNamespace:
    """The cluster client, its every-namespace lists and watches of namespaced kinds made
    of one namespace, and every API call (and watch event) counted by method and kind;
    everything else passed through."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self._cluster = cluster
        self._namespace = namespace
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def _count(self, key: str) -> None:
        with self._lock:
            self.calls[key] = self.calls.get(key, 0) + 1

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._cluster, name)
        if name not in CALLS or not callable(found):
            return found

        def counted(resource: Any, *args: Any, **options: Any) -> Any:
            self._count(f"{name} {resolve(resource).plural}")
            return found(resource, *args, **options)
        return counted

    def _scoped(self, resource: Any, namespace: str | None) -> str | None:
        return self._namespace if namespace is None and resolve(resource).namespaced \
            else namespace

    def list(self, resource: Any, namespace: str | None = None, **options: Any) -> Any:
        self._count(f"list {resolve(resource).plural}")
        return self._cluster.list(resource, self._scoped(resource, namespace), **options)

    def watch(self, resource: Any, namespace: str | None = None, **options: Any) -> Any:
        plural = resolve(resource).plural
        self._count(f"watch {plural}")
        for event in self._cluster.watch(resource, self._scoped(resource, namespace),
                                         **options):
            self._count(f"watch event {plural}")
            yield event


def cluster_client(url: str, token: str, ca_file: str, qps: float, burst: int) -> Any:
    try:
        from fluence_core.kube.client import KubeCluster
    except ImportError:  # a tree from before the kube/ package
        from fluence_core.kube import KubeCluster  # type: ignore[no-redef]
    return KubeCluster.from_token(url, token, ca_file=ca_file, qps=qps, burst=burst)


def main() -> None:
    url, token, ca_file, workdir, namespace = sys.argv[1:6]
    from fluence_core.log import configure
    from fluence_core.settings import load_settings
    from fluence_core.webhook.transport import tls
    from fluence_core.webhook.main import make_server

    configure("WARNING")  # an INFO line per PodGroup is not what is measured
    cert = tls.generate(["localhost"], Path(workdir) / "tls", ip_addresses=["127.0.0.1"])
    settings = load_settings(webhook_cert_dir=Path(workdir) / "tls",
                             webhook_config="bench-not-published")
    cluster = OneNamespace(cluster_client(url, token, ca_file, settings.kube.qps,
                                          settings.kube.burst), namespace)
    ports: dict[str, Any] = {"port": 0}
    if "report_port" in inspect.signature(make_server).parameters:
        ports["report_port"] = 0
    server = make_server(settings, cluster, host="127.0.0.1", **ports)
    reviews = time_reviews(server.service)
    admission = getattr(server, "admission", server)  # today's: two servers in one

    def report() -> None:
        for _ in sys.stdin:
            with cluster._lock:
                calls = dict(cluster.calls)
            print(json.dumps([time.process_time(), take(reviews), admission.accepted,
                              run_queue_wait(), calls]), flush=True)
        server.shutdown()

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(json.dumps({"port": server.port, "ca": cert.ca_pem.decode()}), flush=True)
    report()
    thread.join(10)


if __name__ == "__main__":
    main()
