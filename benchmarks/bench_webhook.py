"""Load test: N concurrent HTTPS clients send M admissions to a real webhook server.

The server runs in this process with the built-in handlers and an in-memory
cluster (so the figures measure the webhook, not an API server): every request
is a new grouped quantum pod — admission control, the quantum split, gang and
fluxion-env all run, and PodGroups and RBAC objects are created. Each client
keeps one TLS connection open, as the API server does.

    python benchmarks/bench_webhook.py --clients 50 --requests 10000
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import statistics
import tempfile
import threading
import time
from pathlib import Path

from fluence_core import names
from fluence_core.fake_cluster import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import load_settings
from fluence_core.webhook import build_service, tls
from fluence_core.webhook.server import WebhookServer, server_context


def review_body(i: int) -> bytes:
    group = f"g{i // 4}"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{group}-{i % 4}", "namespace": "default",
                        "labels": {names.GROUP_LABEL: group, names.JOB_COMPLETION_INDEX: str(i % 4)},
                        "annotations": {names.COORDINATION_ANNOTATION: names.COORDINATION_SHARED,
                                        names.GROUP_SIZE_ANNOTATION: "4"}},
           "spec": {"schedulerName": names.SCHEDULER_NAME, "containers": [
               {"name": "app", "image": "python:3.12",
                "resources": {"requests": {"cpu": "1", names.extended_resource("qpu"): "1"}}}]}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": f"u{i}", "operation": "CREATE", "namespace": "default",
                                   "resource": {"group": "", "version": "v1", "resource": "pods"},
                                   "object": pod}}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()

    # No nodes in the fake: admission control judges nothing, every handler mutates.
    os.environ["FLUENCE_ADMISSION_CONTROL"] = "off"
    settings = load_settings()
    cluster = FakeCluster()
    service = build_service(settings, get_plugin_manager(settings), cluster)
    directory = Path(tempfile.mkdtemp())
    cert = tls.generate(["localhost"], directory, ip_addresses=["127.0.0.1"])
    server = WebhookServer(("127.0.0.1", 0), service,
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client_ctx = ssl.create_default_context(cadata=cert.ca_pem.decode())

    bodies = [review_body(i) for i in range(args.requests)]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(args.requests))

    def client() -> None:
        conn = http.client.HTTPSConnection("localhost", server.port, context=client_ctx, timeout=30)
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
                conn = http.client.HTTPSConnection("localhost", server.port, context=client_ctx, timeout=30)
            mine.append(time.perf_counter() - started)
        conn.close()
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server.shutdown()
    latencies.sort()
    quantiles = statistics.quantiles(latencies, n=100)
    print(f"clients={args.clients} admissions={len(latencies)} errors={len(errors)} "
          f"elapsed={elapsed:.1f}s throughput={len(latencies) / elapsed:.0f}/s")
    print(f"p50={quantiles[49] * 1000:.1f}ms p90={quantiles[89] * 1000:.1f}ms "
          f"p99={quantiles[98] * 1000:.1f}ms max={latencies[-1] * 1000:.1f}ms")
    print(f"podgroups={len(cluster.list('podgroups', 'default').items)}")
    if errors:
        print("first errors:", errors[:5])


if __name__ == "__main__":
    main()
