"""The webhook's cost, measured two ways.

**In process** (always): N concurrent HTTPS clients send M AdmissionReviews to
a webhook server in this process with the built-in handlers and an in-memory
cluster (so the figures measure the webhook, not an API server): every request
is a new grouped quantum pod; admission control, the quantum split, gang and
fluxion-env all run, and PodGroups are created. Each client keeps one TLS
connection open, as the API server does.

**Through a real API server** (when ``KUBEBUILDER_ASSETS`` names etcd and
kube-apiserver): the webhook runs in a process of its own, as deployed (default
settings, its own API client and rate limit), registered for pod CREATE in one
namespace; the same pods are created in that namespace and in one without the
webhook, by 1 client and by 20 concurrent clients, each phase alternating
without/with a few times. Reported: create latency p50/p99 on each path, the
latency the webhook adds (p50 and p99 of "with" minus those of "without") and
the creates/s ratio with/without.

    python benchmarks/bench_webhook.py --clients 50 --requests 10000
    KUBEBUILDER_ASSETS=/usr/local/kubebuilder/bin python benchmarks/bench_webhook.py \\
        --mode apiserver --pods gang
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import ssl
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fluence_core import names
from fluence_core.fake_cluster import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import load_settings
from fluence_core.webhook import BackgroundWriter, build_service, tls
from fluence_core.webhook.server import WebhookServer, server_context

HOOKED = "bench-hooked"
PLAIN = "bench-plain"
WEBHOOK_CONFIG = "fluence-bench"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}ms"


def quantile(values: list[float], q: int) -> float:
    """The q-th percentile (1..99) of ``values``."""
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def latency_summary(latencies: list[float]) -> dict[str, float]:
    """Seconds at p50, p90, p99 and the maximum: the one summary every table row uses."""
    if not latencies:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    return {"p50": quantile(latencies, 50), "p90": quantile(latencies, 90),
            "p99": quantile(latencies, 99), "max": max(latencies)}


# -- in process ------------------------------------------------------------------------------


def review_body(i: int) -> bytes:
    group = f"g{i // 4}"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{group}-{i % 4}", "namespace": "default",
                        "labels": {names.GROUP_LABEL: group,
                                   names.JOB_COMPLETION_INDEX: str(i % 4)},
                        "annotations": {names.COORDINATION_ANNOTATION: names.COORDINATION_SHARED,
                                        names.GROUP_SIZE_ANNOTATION: "4"}},
           "spec": {"schedulerName": names.SCHEDULER_NAME, "containers": [
               {"name": "app", "image": "python:3.12",
                "resources": {"requests": {"cpu": "1", names.extended_resource("qpu"): "1"}}}]}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": f"u{i}", "operation": "CREATE", "namespace": "default",
                                   "resource": {"group": "", "version": "v1", "resource": "pods"},
                                   "object": pod}}).encode()


def in_process(clients: int, requests: int) -> None:
    # No nodes in the fake: admission control judges nothing, every handler mutates.
    before = os.environ.get("FLUENCE_ADMISSION_CONTROL")
    os.environ["FLUENCE_ADMISSION_CONTROL"] = "off"
    settings = load_settings()
    cluster = FakeCluster()
    writer = BackgroundWriter()  # as ``fluence webhook`` runs: PodGroups after the answer
    service = build_service(settings, get_plugin_manager(settings), cluster, writer=writer)
    directory = Path(tempfile.mkdtemp())
    cert = tls.generate(["localhost"], directory, ip_addresses=["127.0.0.1"])
    server = WebhookServer(("127.0.0.1", 0), service,
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client_ctx = ssl.create_default_context(cadata=cert.ca_pem.decode())

    bodies = [review_body(i) for i in range(requests)]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(requests))

    def connect() -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("localhost", server.port, context=client_ctx,
                                           timeout=30)

    def client() -> None:
        conn = connect()
        mine: list[float] = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            started = time.perf_counter()
            try:
                conn.request("POST", "/mutate", body=bodies[i],
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                answer = json.loads(response.read())
                if response.status != 200 or not answer["response"]["allowed"]:
                    with lock:
                        errors.append(f"{response.status}: {answer['response'].get('status')}")
            except Exception as error:  # noqa: BLE001 - counted, reported
                with lock:
                    errors.append(repr(error))
                conn.close()
                conn = connect()
            mine.append(time.perf_counter() - started)
        conn.close()
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server.shutdown()
    server.server_close()
    writer.close()
    if before is None:  # the API server's webhook process runs with the defaults
        del os.environ["FLUENCE_ADMISSION_CONTROL"]
    else:
        os.environ["FLUENCE_ADMISSION_CONTROL"] = before
    summary = latency_summary(latencies)
    print(f"in process: clients={clients} admissions={len(latencies)} errors={len(errors)} "
          f"elapsed={elapsed:.1f}s throughput={len(latencies) / elapsed:.0f}/s")
    print("  " + " ".join(f"{k}={_ms(v)}" for k, v in summary.items())
          + f" podgroups={len(cluster.list('podgroups', 'default').items)}")
    if errors:
        print("  first errors:", errors[:5])


# -- through a real API server ---------------------------------------------------------------


def serve_webhook(url: str, token: str, ca_file: str, workdir: str, reply: Connection) -> None:
    """The webhook process: default settings, its own API client, as ``fluence webhook`` runs."""
    from fluence_core.kube import KubeCluster
    from fluence_core.log import configure

    configure("WARNING")  # an INFO line per PodGroup is not what is measured
    settings = load_settings()
    cluster = KubeCluster.from_token(url, token, ca_file=ca_file, qps=settings.kube_qps,
                                     burst=settings.kube_burst)
    service = build_service(settings, get_plugin_manager(settings), cluster,
                            writer=BackgroundWriter())
    cert = tls.generate(["localhost"], Path(workdir), ip_addresses=["127.0.0.1"])
    server = WebhookServer(("127.0.0.1", 0), service,
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    reviews: list[float] = []  # seconds each review took inside the webhook
    review = service.review

    def timed(body: bytes) -> Any:
        started = time.perf_counter()
        try:
            return review(body)
        finally:
            reviews.append(time.perf_counter() - started)

    service.review = timed  # type: ignore[method-assign]
    reply.send((server.port, cert.ca_pem))

    def cpu() -> None:  # the parent asks for the CPU used so far and the reviews' times
        while reply.recv() is not None:
            taken = reviews[:]
            del reviews[:len(taken)]
            reply.send((time.process_time(), taken))

    threading.Thread(target=cpu, daemon=True).start()
    server.serve_forever()


def pod_body(name: str, i: int, shape: str) -> bytes:
    """A Fluence pod: a member of a gang of 4 (``gang``) or alone (``single``)."""
    metadata: dict[str, Any] = {"name": name}
    if shape == "gang":
        metadata["labels"] = {names.GROUP_LABEL: f"{name.rsplit('-', 1)[0]}-g{i // 4}"}
        metadata["annotations"] = {names.GROUP_SIZE_ANNOTATION: "4"}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {
        "schedulerName": names.SCHEDULER_NAME,
        "containers": [{"name": "app", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}).encode()


@dataclass
class Phase:
    """The creates of one path, pooled over its repeats."""

    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0


class ApiClient:
    """Raw keep-alive HTTPS to the API server: what is timed is the server, not a client library."""

    def __init__(self, url: str, token: str, context: ssl.SSLContext) -> None:
        host, port = url.removeprefix("https://").rsplit(":", 1)
        self.conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "Accept": "application/json"}

    def create(self, namespace: str, body: bytes, *, dry_run: bool = False) -> tuple[int, Any]:
        path = f"/api/v1/namespaces/{namespace}/pods" + ("?dryRun=All" if dry_run else "")
        self.conn.request("POST", path, body=body, headers=self.headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read())


def run_phase(url: str, token: str, context: ssl.SSLContext, namespace: str, clients: int,
              count: int, prefix: str, shape: str, into: Phase) -> None:
    bodies = [pod_body(f"{prefix}-{i}", i, shape) for i in range(count)]
    lock = threading.Lock()
    counter = iter(range(count))
    connections = [ApiClient(url, token, context) for _ in range(clients)]
    for api in connections:  # the handshake is not a create's cost
        api.conn.connect()

    def client(api: ApiClient) -> None:
        mine: list[float] = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            started = time.perf_counter()
            try:
                status, answer = api.create(namespace, bodies[i])
                if status != 201:
                    with lock:
                        into.errors.append(f"{status}: {answer.get('message')}")
            except Exception as error:  # noqa: BLE001 - counted, reported
                with lock:
                    into.errors.append(repr(error))
                api.conn.close()
            mine.append(time.perf_counter() - started)
        with lock:
            into.latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(api,)) for api in connections]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    into.elapsed += time.perf_counter() - started
    for api in connections:
        api.conn.close()


def process_cpu(pid: int) -> float:
    """Seconds of CPU process ``pid`` used so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def register_webhook(kube: Any, port: int, ca_pem: bytes) -> None:
    """Pods created in HOOKED go to the webhook, with the deployed matchCondition."""
    from fluence_core.testing_apiserver import webhook_entry

    scheduler_is_fluence = {"name": "scheduler-is-fluence",  # as deploy/webhook.yaml
                            "expression": "object.spec.schedulerName == 'fluence'"}
    kube.create("mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIG},
        "webhooks": [webhook_entry("pods", f"https://127.0.0.1:{port}/mutate", HOOKED,
                                   ca_pem=ca_pem, match_conditions=[scheduler_is_fluence])]})


def wait_for_webhook(api: ApiClient, shape: str) -> None:
    """Until the API server calls the webhook (a dry-run create comes back mutated)."""
    deadline = time.monotonic() + 60
    probe = pod_body("probe-x", 0, "gang")
    while time.monotonic() < deadline:
        status, answer = api.create(HOOKED, probe, dry_run=True)
        if status == 201 and (answer.get("spec") or {}).get("schedulingGroup"):
            return
        time.sleep(0.2)
    raise SystemExit("the API server never called the webhook")


def through_apiserver(assets: Path, shape: str, counts: dict[int, int], repeats: int) -> None:
    from fluence_core.testing_apiserver import ensure_namespace, start_apiserver

    workdir = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
    with start_apiserver(assets, workdir / "apiserver", controller_manager=False) as apiserver:
        kube = apiserver.cluster(qps=1000, burst=1000)
        for namespace in (HOOKED, PLAIN):
            ensure_namespace(kube, namespace)
        parent, child = multiprocessing.get_context("spawn").Pipe()
        webhook = multiprocessing.get_context("spawn").Process(
            target=serve_webhook, daemon=True,
            args=(apiserver.url, apiserver.token, str(apiserver.ca_file), str(workdir / "tls"),
                  child))
        webhook.start()
        try:
            if not parent.poll(60):
                raise SystemExit("the webhook process never came up")
            port, ca_pem = parent.recv()
            register_webhook(kube, port, ca_pem)
            context = ssl.create_default_context(cafile=str(apiserver.ca_file))
            wait_for_webhook(ApiClient(apiserver.url, apiserver.token, context), shape)
            print(f"through kube-apiserver ({assets}), {shape} pods, webhook in its own process")
            print("| clients | path | creates | creates/s | p50 | p99 | errors |")
            print("|---|---|---|---|---|---|---|")
            summary = []
            pids = [p.pid for p in apiserver.processes.values()]
            before, started = sum(map(process_cpu, pids)), time.perf_counter()
            time.sleep(3)
            idle = (sum(map(process_cpu, pids)) - before) / (time.perf_counter() - started)
            for clients, count in counts.items():
                phases = {PLAIN: Phase(), HOOKED: Phase()}
                parent.send("cpu")
                cpu_before = parent.recv()[0]
                run_phase(apiserver.url, apiserver.token, context, PLAIN, clients,
                          min(count, 50), f"warm{clients}", shape, Phase())
                control_plane = {namespace: 0.0 for namespace in phases}
                for repeat in range(repeats):
                    for namespace, phase in phases.items():
                        before, started = sum(map(process_cpu, pids)), time.perf_counter()
                        run_phase(apiserver.url, apiserver.token, context, namespace, clients,
                                  count, f"c{clients}r{repeat}", shape, phase)
                        control_plane[namespace] += (sum(map(process_cpu, pids)) - before
                                                     - idle * (time.perf_counter() - started))
                cut = {namespace: latency_summary(phase.latencies)
                       for namespace, phase in phases.items()}
                for namespace, phase in phases.items():
                    print(f"| {clients} | {'with' if namespace == HOOKED else 'without'} "
                          f"| {len(phase.latencies)} | {phase.rate:.0f} "
                          f"| {_ms(cut[namespace]['p50'])} "
                          f"| {_ms(cut[namespace]['p99'])} | {len(phase.errors)} |")
                plain, hooked = phases[PLAIN], phases[HOOKED]
                parent.send("cpu")
                cpu_after, reviews = parent.recv()
                cpu = (cpu_after - cpu_before) / max(1, len(hooked.latencies))
                inside = latency_summary(reviews)
                added_p50 = cut[HOOKED]["p50"] - cut[PLAIN]["p50"]
                added_p99 = cut[HOOKED]["p99"] - cut[PLAIN]["p99"]
                summary.append(
                    f"clients={clients}: added p50 {_ms(added_p50)}, added p99 {_ms(added_p99)}"
                    f", creates/s with/without {hooked.rate / plain.rate:.2f}x"
                    f"; CPU per create (idle subtracted): kube-apiserver+etcd "
                    f"{_ms(control_plane[PLAIN] / max(1, len(plain.latencies)))} without, "
                    f"{_ms(control_plane[HOOKED] / max(1, len(hooked.latencies)))} with, "
                    f"webhook {_ms(cpu)}; a review inside the webhook "
                    f"p50 {_ms(inside['p50'])} p99 {_ms(inside['p99'])}")
                for phase in phases.values():
                    if phase.errors:
                        summary.append(f"  first errors: {phase.errors[:3]}")
            print("\n".join(summary))
        finally:
            webhook.terminate()
            webhook.join(10)
            kube.close()


def main() -> None:
    from fluence_core.testing_apiserver import find_assets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("both", "inprocess", "apiserver"), default="both")
    parser.add_argument("--clients", type=int, default=50, help="in process")
    parser.add_argument("--requests", type=int, default=10_000, help="in process")
    parser.add_argument("--pods", choices=("gang", "single"), default="gang",
                        help="through the API server: members of gangs of 4, or lone pods")
    parser.add_argument("--creates", type=int, default=200,
                        help="through the API server: creates per phase with one client "
                             "(x5 with 20 clients)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="through the API server: without/with alternations per client count")
    args = parser.parse_args()
    if args.mode in ("both", "inprocess"):
        in_process(args.clients, args.requests)
    if args.mode in ("both", "apiserver"):
        assets, reason = find_assets()
        if assets is None:
            print(f"through a real API server: skipped ({reason})")
            return
        through_apiserver(assets, args.pods, {1: args.creates, 20: args.creates * 5},
                          args.repeats)


if __name__ == "__main__":
    main()
