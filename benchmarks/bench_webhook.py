"""The webhook's cost, measured two ways.

**In process** (always): N concurrent HTTPS clients send M AdmissionReviews to
a webhook server in this process with the built-in handlers and an in-memory
cluster (so the figures measure the webhook, not an API server): every request
is a new grouped quantum pod; admission control, the quantum split, gang and
fluxion-env all run, and PodGroups are created. Each client keeps one TLS
connection open, as the API server does.

**Through a real API server** (``KUBEBUILDER_ASSETS``, else envtest's default
folder, names etcd and kube-apiserver): the webhook runs in a process of its
own, as deployed (default settings, its own API client and rate limit, the
background writer), registered for pod CREATE in one namespace; the same pods
are created there, in a namespace without any webhook, in one without a
webhook where the client itself makes each gang's PodGroup and points the pods
at it (what the same gangs cost without Fluence), in one whose webhook is the
same server answering "allowed" and nothing else (the floor: what calling any
webhook served this way costs), in one whose webhook is that server answering
with the patch Fluence's gives a gang pod and making no PodGroup (what any
mutation costs the API server), through Fluence's webhook, and through
Fluence's webhook making its PodGroups on the request path (as before the
background writer), by 1 client and by 20 concurrent clients, the paths
alternating in short repeats. ``--pods job``: each gang is an Indexed Job of 4,
created first (in the creates/s, not in the pods' latency; Fluence's webhook is
registered for Jobs too, as deployed), then its pods as the job controller makes
them from the stored Job. Reported: create latency p50/p99 on each path,
the latency each webhook adds (p50 and p99 of its path minus those without), the
creates/s ratio against the path without, CPU per create, the connections the
API server opened to the webhook, and each webhook call as the API server timed
it (its ``apiserver_admission_webhook_admission_duration_seconds``, read from
``/metrics`` before and after; each path's webhook has a name of its own) beside
the review's own time inside the webhook: their difference is the transport, both
ends; and how long the API server's, etcd's and the webhook's threads waited for a
CPU per create (Linux schedstat): the share of the latency the machine decides.
``--profile DIR`` has py-spy sample each webhook process.

Paths ``deployed`` and ``deployed-base`` run ``fluence webhook`` as deployed
(``webhook_process.py``: the tree's own ``make_server``, with its informers,
controller, background writer and loops, each process's lists and watches kept to
its namespace), ``deployed`` by this tree and ``deployed-base`` by git ``REF``'s
whole tree (``--baseline REF``: a worktree with a venv of its own, so a baseline
from before a module moved runs as it was): the webhook before and after, one run.

Path ``skipping`` is Fluence's webhook registered with the matchConditions its
handlers declare, as ``fluence webhook`` publishes them at start: the pods no
handler needs are not sent (``hooked`` has the manifest's scheduler name only). Path
``never`` is the null webhook with a condition never true: what deciding not to call
costs the API server. Path ``policy`` has no webhook: a MutatingAdmissionPolicy (CEL
run by the API server itself) gives each gang pod the patch Fluence's webhook gives it,
checked on a dry run first: what mutating a pod costs with no call at all.

**Review CPU** (``--mode review``): CPU per review of the in-process bodies, no
HTTP, with today's ``review.py`` and (``--baseline REF``) that commit's.

Everything printed is also written as JSON (``--json``), with the load averages
before and after: the machine is shared, so only ratios measured in the same
run mean anything.

    python benchmarks/bench_webhook.py --clients 50 --requests 10000
    python benchmarks/bench_webhook.py --mode apiserver --pods gang --json out.json
    python benchmarks/bench_webhook.py --mode apiserver --baseline 71b89f5 \
        --paths plain,deployed,deployed-base --baseline-dir /tmp/fluence-base
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import ssl
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baseline import baseline_python, baseline_tree  # noqa: E402 - beside this file
from webhook_process import run_queue_wait, take, time_reviews  # noqa: E402 - beside this file

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import load_settings
from fluence_core.webhook import BackgroundWriter, build_service
from fluence_core.webhook.transport import tls
from fluence_core.webhook.controller.informer import Watched, watched_for
from fluence_core.webhook.admission.review import AdmissionEndpoint, Outcome, allow
from fluence_core.webhook.transport.server import WebhookServer, server_context

HOOKED = "bench-hooked"
INLINE = "bench-inline"
NATIVE = "bench-native"
NULL = "bench-null"
PATCHED = "bench-patched"
PLAIN = "bench-plain"
DEPLOYED = "bench-deployed"
DEPLOYED_BASE = "bench-deployed-base"
SKIPPING = "bench-skipping"
"""Fluence's webhook registered with the matchConditions its handlers declare, as ``fluence
webhook`` publishes them at start (the others are registered as deploy/webhook.yaml is)."""
NEVER = "bench-never"
"""The null webhook registered with a condition that is never true: what deciding not to
call a webhook costs the API server (its CEL and the object it evaluates it on)."""
POLICY = "bench-policy"
"""No webhook: a MutatingAdmissionPolicy (CEL in the API server, GA in 1.36) points each
grouped pod at its group, the patch Fluence's webhook gives a gang pod; no PodGroup."""
DEPLOYED_PATHS = (DEPLOYED, DEPLOYED_BASE)
"""Paths served by ``fluence webhook`` as deployed (``webhook_process.py``: its
``make_server``, informers, controller, writer and loops), this tree's and, with
``--baseline REF``, REF's whole tree (a worktree with a venv of its own), one run."""


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


def in_process(clients: int, requests: int) -> dict[str, Any]:
    """Admissions through the HTTPS server in this process; printed, and returned."""
    # No nodes in the fake: admission control judges nothing, every handler mutates.
    before = os.environ.get("FLUENCE_ADMISSION_CONTROL")
    os.environ["FLUENCE_ADMISSION_CONTROL"] = "off"
    settings = load_settings()
    cluster = FakeCluster()
    writer = BackgroundWriter()  # as ``fluence webhook`` runs: PodGroups after the answer
    service = build_service(settings, get_plugin_manager(settings), cluster, writer=writer)
    directory = Path(tempfile.mkdtemp())
    cert = tls.generate(["localhost"], directory, ip_addresses=["127.0.0.1"])
    server = WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(service),
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
    podgroups = len(cluster.list("podgroups", "default").items)
    print(f"in process: clients={clients} admissions={len(latencies)} errors={len(errors)} "
          f"elapsed={elapsed:.1f}s throughput={len(latencies) / elapsed:.0f}/s")
    print("  " + " ".join(f"{k}={_ms(v)}" for k, v in summary.items())
          + f" podgroups={podgroups}")
    if errors:
        print("  first errors:", errors[:5])
    return {"clients": clients, "admissions": len(latencies), "errors": len(errors),
            "admissions_per_s": len(latencies) / elapsed, "podgroups": podgroups,
            **{f"{k}_ms": v * 1000 for k, v in summary.items()}}


# -- through a real API server ---------------------------------------------------------------


class NullService:
    """Allows every pod unchanged: what calling *any* webhook on this server costs."""

    writer = None

    def review(self, body: bytes) -> Outcome:
        return Outcome(200, allow(json.loads(body)["request"]["uid"]))


class PatchingService(NullService):
    """The null webhook answering with the patch Fluence's gives (a gang pod's one ``add`` of
    ``spec.schedulingGroup``) and making no PodGroup: what any mutation costs the API server
    (it encodes the pod, applies the patch, decodes and compares it, then runs the mutating
    admission chain a second time), apart from what Fluence does."""

    def review(self, body: bytes) -> Outcome:
        request = json.loads(body)["request"]
        group = (request["object"]["metadata"].get("labels") or {}).get(names.GROUP_LABEL)
        patch = [{"op": "add", "path": "/spec/schedulingGroup",
                  "value": {"podGroupName": group}}] if group else None
        return Outcome(200, allow(request["uid"], patch))


def baseline_module(source: str, name: str, workdir: Path) -> Any:
    """The module whose text is ``source`` (a module at the baseline commit), loaded as
    ``fluence_baseline_<name>`` beside the rest of today's package."""
    import importlib.util

    file = workdir / f"baseline_{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(f"fluence_baseline_{name}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def git_show(ref: str, path: str) -> str:
    """The text of ``path`` at git ``ref`` in this repository (SystemExit if there is none)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    shown = subprocess.run(["git", "-C", str(root), "show", f"{ref}:{path}"],
                           capture_output=True, text=True)
    if shown.returncode != 0:
        raise SystemExit(f"--baseline {ref}: {shown.stderr.strip()}")
    return shown.stdout


def review_cpu(baseline: str | None, reviews: int = 600, repeats: int = 6) -> dict[str, Any]:
    """CPU per ``AdmissionService.review`` in this process (no HTTP): the in-process bench's
    grouped quantum pods through every built-in handler, with today's ``review.py`` and, with
    ``baseline``, that commit's, the rest of the package today's; repeats alternate."""
    import fluence_core.webhook.admission.review as today

    modules = {"today": today}
    if baseline is not None:
        modules[baseline] = baseline_module(
            git_show(baseline, "fluence_core/webhook/admission/review.py"), "review",
            Path(tempfile.mkdtemp()))
    before = os.environ.get("FLUENCE_ADMISSION_CONTROL")
    os.environ["FLUENCE_ADMISSION_CONTROL"] = "off"  # as in process: every handler mutates
    try:
        settings = load_settings()
        built = build_service(settings, get_plugin_manager(settings), FakeCluster())
        bodies = [review_body(i) for i in range(reviews * repeats)]
        cpu: dict[str, list[float]] = {name: [] for name in modules}
        for repeat in range(repeats):
            for name, module in modules.items():
                service = module.AdmissionService(
                    settings, built.handlers, cluster=FakeCluster(), admit=built.admit,
                    resource_config=built.resource_config)
                started = time.process_time()
                for body in bodies[repeat * reviews:(repeat + 1) * reviews]:
                    outcome = service.review(body)
                    if outcome.status != 200 or not outcome.response["allowed"]:
                        raise SystemExit(f"review refused a bench pod: {outcome.body}")
                cpu[name].append((time.process_time() - started) / reviews * 1000)
    finally:
        if before is None:
            del os.environ["FLUENCE_ADMISSION_CONTROL"]
        else:
            os.environ["FLUENCE_ADMISSION_CONTROL"] = before
    result: dict[str, Any] = {name: statistics.median(values) for name, values in cpu.items()}
    line = ", ".join(f"{name} {ms:.3f} ms" for name, ms in result.items())
    if baseline is not None:
        result["ratio"] = result["today"] / result[baseline]
        line += f"; today/{baseline} {result['ratio']:.2f}x"
    print(f"CPU per review in process (median of {repeats} x {reviews}): {line}")
    return result


def serve_webhook(url: str, token: str, ca_file: str, workdir: str, reply: Connection,
                  path: str) -> None:
    """The webhook process: default settings, its own API client, as ``fluence webhook`` runs
    (``NULL``: the same server answering every review with "allowed", nothing else;
    ``PATCHED``: the same, with Fluence's patch; ``INLINE``: no background writer)."""
    from fluence_core.kube.client import KubeCluster
    from fluence_core.log import configure

    configure("WARNING")  # an INFO line per PodGroup is not what is measured
    settings = load_settings()
    cluster = KubeCluster.from_token(url, token, ca_file=ca_file, qps=settings.kube.qps,
                                     burst=settings.kube.burst)
    namespace, publish = path, path == SKIPPING
    path = HOOKED if publish else path
    writer = None if path == INLINE else BackgroundWriter()
    # its own namespace only: the other paths' pods are not its to act on
    watched = Watched() if path in (NULL, NEVER, PATCHED) else watched_for(cluster, namespace)
    service: Any = (NullService() if path in (NULL, NEVER) else PatchingService() if path == PATCHED
                    else build_service(settings, get_plugin_manager(settings), cluster,
                                       writer=writer, watched=watched))
    informers = (watched.informers() if path in (NULL, NEVER, PATCHED)
                 else service.controller.informers(namespace))  # and the controller's events
    for each in informers:  # as fluence webhook: lookups instead of reads
        each.start()
        each.wait_synced(30)
    cert = tls.generate(["localhost"], Path(workdir), ip_addresses=["127.0.0.1"])
    server = WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(service),
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    reviews = time_reviews(service)  # seconds each review took inside the webhook
    conditions = (service.match_conditions if publish else
                  [{"name": "never", "expression": "false"}] if path == NEVER else None)
    reply.send((server.port, cert.ca_pem, conditions))

    def report() -> None:  # the parent asks for CPU used, reviews' times and connections
        while reply.recv() is not None:
            reply.send((time.process_time(), take(reviews), server.accepted, run_queue_wait()))

    threading.Thread(target=report, daemon=True).start()
    server.serve_forever()


def group_name(name: str, i: int) -> str:
    """The gang of 4 the ``i``-th pod named ``name`` belongs to."""
    return f"{name.rsplit('-', 1)[0]}-g{i // 4}"


def pod_body(name: str, i: int, shape: str, *, pointing: bool = False) -> bytes:
    """A Fluence pod: a member of a gang of 4 (``gang``) or alone (``single``); ``pointing``:
    already naming its PodGroup, as the webhook would have made it."""
    metadata: dict[str, Any] = {"name": name}
    spec: dict[str, Any] = {
        "schedulerName": names.SCHEDULER_NAME,
        "containers": [{"name": "app", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    if shape == "gang":
        metadata["labels"] = {names.GROUP_LABEL: group_name(name, i)}
        metadata["annotations"] = {names.GROUP_SIZE_ANNOTATION: "4"}
        if pointing:
            spec["schedulingGroup"] = {"podGroupName": group_name(name, i)}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                       "spec": spec}).encode()


def job_body(name: str, *, pointing: bool = False) -> bytes:
    """An Indexed Job of a gang of 4 for Fluence, its group named after it; no ``group-size``
    on its template (the pods' minCount is the Job's parallelism); ``pointing``: its template
    already naming its PodGroup, as Fluence's job-group handler makes it."""
    spec: dict[str, Any] = {
        "schedulerName": names.SCHEDULER_NAME, "restartPolicy": "Never",
        "containers": [{"name": "app", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    if pointing:
        spec["schedulingGroup"] = {"podGroupName": name}
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                       "spec": {"completionMode": "Indexed", "completions": 4, "parallelism": 4,
                                "template": {"metadata": {"labels": {names.GROUP_LABEL: name}},
                                             "spec": spec}}}).encode()


INDEX = "batch.kubernetes.io/job-completion-index"


def job_pods(job: dict[str, Any]) -> list[bytes]:
    """The pods the job controller of kube-controller-manager 1.36 makes of a stored Indexed Job
    (read from its API server's audit log): the stored template with the Job's labels, the
    index as label, annotation and env, the controller's owner reference and finalizer."""
    meta, template = job["metadata"], job["spec"]["template"]
    name, uid = meta["name"], meta["uid"]
    bodies = []
    for index in range(job["spec"]["completions"]):
        labels = {**(template["metadata"].get("labels") or {}),
                  "batch.kubernetes.io/controller-uid": uid, INDEX: str(index),
                  "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name}
        spec = json.loads(json.dumps(template["spec"]))
        spec["hostname"] = f"{name}-{index}"
        for container in spec["containers"]:
            container.setdefault("env", []).append({
                "name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.labels['{INDEX}']"}}})
        bodies.append(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "generateName": f"{name}-{index}-", "labels": labels,
            "annotations": {INDEX: str(index)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                 "uid": uid, "controller": True, "blockOwnerDeletion": True}],
            "finalizers": ["batch.kubernetes.io/job-tracking"]}, "spec": spec}).encode())
    return bodies


def pod_group_body(name: str) -> bytes:
    return json.dumps({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                       "metadata": {"name": name},
                       "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}).encode()


@dataclass
class Phase:
    """The creates of one path, pooled over its repeats."""

    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    errors: list[str] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    """Creates/s of each repeat, in order (the paths' repeats alternate)."""

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

    def create(self, namespace: str, body: bytes, *, dry_run: bool = False,
               plural: str = "pods") -> tuple[int, Any]:
        path = (f"/api/v1/namespaces/{namespace}/pods" if plural == "pods" else
                f"/apis/batch/v1/namespaces/{namespace}/jobs" if plural == "jobs" else
                f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/{plural}")
        path += "?dryRun=All" if dry_run else ""
        self.conn.request("POST", path, body=body, headers=self.headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read())


def run_phase(url: str, token: str, context: ssl.SSLContext, namespace: str, clients: int,
              count: int, prefix: str, shape: str, into: Phase) -> None:
    native = namespace == NATIVE and shape != "single"  # the client makes each PodGroup
    jobs = shape == "job"  # a client takes a gang: its Job, then its 4 pods
    bodies = [pod_body(f"{prefix}-{i}", i, shape, pointing=native) for i in range(count)]
    lock = threading.Lock()
    counter = iter(range(0, count, 4 if jobs else 1))
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
            mine_now = [bodies[i]]
            try:  # a gang's PodGroup and Job: in the creates/s, not in the pods' latency
                group = group_name(f"{prefix}-{i}", i)
                if native and i % 4 == 0:
                    status, answer = api.create(namespace, pod_group_body(group),
                                                plural="podgroups")
                    if status != 201:
                        with lock:
                            into.errors.append(f"PodGroup {status}: {answer.get('message')}")
                if jobs:
                    status, answer = api.create(namespace, job_body(group, pointing=native),
                                                plural="jobs")
                    mine_now = job_pods(answer) if status == 201 else []
                    if status != 201:
                        with lock:
                            into.errors.append(f"Job {status}: {answer.get('message')}")
            except Exception as error:  # noqa: BLE001 - counted, reported
                with lock:
                    into.errors.append(repr(error))
                api.conn.close()
            for body in mine_now:
                started = time.perf_counter()
                try:
                    status, answer = api.create(namespace, body)
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
    took = time.perf_counter() - started
    into.elapsed += took
    into.rates.append(count / took)
    for api in connections:
        api.conn.close()


def process_cpu(pid: int) -> float:
    """Seconds of CPU process ``pid`` used so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


GROUPED_FOR_FLUENCE = (  # as deploy/webhook.yaml
    "has(object.spec.template.spec.schedulerName) &&"
    " object.spec.template.spec.schedulerName == 'fluence' &&"
    " has(object.spec.template.metadata) && has(object.spec.template.metadata.labels) &&"
    " object.spec.template.metadata.labels[?'fluence.flux-framework.org/group'].orValue('')"
    " != ''")


def register_webhook(kube: Any, name: str, namespace: str, port: int, ca_pem: bytes, *,
                     jobs: bool = False, conditions: list[dict[str, str]] | None = None) -> None:
    """Pods (and with ``jobs``, Jobs) created in ``namespace`` go to the webhook on ``port``,
    with the deployed matchConditions, or for pods ``conditions`` (the ones Fluence's
    handlers declare)."""
    from fluence_core.testing_apiserver import webhook_entry
    from fluence_core.webhook.cel import scheduler_condition

    url = f"https://127.0.0.1:{port}/mutate"
    webhooks = [webhook_entry("pods", url, namespace, ca_pem=ca_pem,
                              match_conditions=conditions or [scheduler_condition()])]
    webhooks[0]["name"] = webhook_name(namespace)  # the API server's metrics are per name
    if jobs:
        entry = webhook_entry("jobs", url, namespace, ca_pem=ca_pem, match_conditions=[
            {"name": "grouped-for-fluence", "expression": GROUPED_FOR_FLUENCE}])
        webhooks.append({**entry, "name": f"jobs-{webhook_name(namespace)}",
                         "failurePolicy": "Ignore", "sideEffects": "NoneOnDryRun"})
    kube.create("mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": webhooks})


def register_policy(kube: Any, namespace: str) -> None:
    """A MutatingAdmissionPolicy and its binding for ``namespace``: a Fluence pod with the
    group label and no scheduling group gets ``spec.schedulingGroup.podGroupName`` set to
    the label's value, by the API server itself (a JSON patch built in CEL)."""
    from fluence_core.kube.api import Resource

    policies, bindings = (Resource(plural, kind, group="admissionregistration.k8s.io",
                                   namespaced=False)
                          for plural, kind in (
                              ("mutatingadmissionpolicies", "MutatingAdmissionPolicy"),
                              ("mutatingadmissionpolicybindings",
                               "MutatingAdmissionPolicyBinding")))
    group = f"object.metadata.labels[{names.GROUP_LABEL!r}]"
    kube.create(policies, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": f"bench-{namespace}"},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods"]}]},
            "matchConditions": [
                {"name": "fluence",
                 "expression": f"object.spec.schedulerName == {names.SCHEDULER_NAME!r}"},
                {"name": "grouped",
                 "expression": f"has(object.metadata.labels) && {names.GROUP_LABEL!r} in"
                               " object.metadata.labels && !has(object.spec.schedulingGroup)"}],
            "failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": (
                "[JSONPatch{op: 'add', path: '/spec/schedulingGroup', value: "
                f"Object.spec.schedulingGroup{{podGroupName: {group}}}}}]")}}]}})
    kube.create(bindings, {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": f"bench-{namespace}"},
        "spec": {"policyName": f"bench-{namespace}", "matchResources": {"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": namespace}}}}})


def wait_policy(api: ApiClient) -> None:
    """Until the policy points a dry-run gang pod at its group (the API server loads policies
    a moment after they are stored); a policy that never does ends the run."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, answer = api.create(POLICY, pod_body("probe-x", 0, "gang"), dry_run=True)
        if status == 201 and (answer.get("spec") or {}).get("schedulingGroup"):
            return
        time.sleep(0.2)
    raise SystemExit("the MutatingAdmissionPolicy never pointed a pod at its group")


def webhook_name(namespace: str) -> str:
    """The name of the webhook registered for ``namespace`` (one per path)."""
    return f"{namespace}.{names.DOMAIN}"


WEBHOOK_SECONDS = "apiserver_admission_webhook_admission_duration_seconds"
"""The API server's histogram of each webhook call, from its side: building the
AdmissionReview, the HTTPS round trip, decoding the answer (and applying a patch). Its
buckets start at 5 ms, so only the sum and count (the mean) say anything below that."""


def webhook_seconds(api: ApiClient) -> dict[str, tuple[float, int]]:
    """Per webhook name, the seconds the API server spent calling it and how many calls, so far
    (summed over the histogram's other labels)."""
    api.conn.request("GET", "/metrics", headers=api.headers)
    response = api.conn.getresponse()
    text = response.read().decode()
    if response.status != 200:
        raise SystemExit(f"the API server's /metrics answered {response.status}: {text[:200]}")
    totals: dict[str, list[float]] = {}
    for line in text.splitlines():
        if not line.startswith(WEBHOOK_SECONDS + "_"):
            continue
        metric, _, value = line.rpartition(" ")
        kind = metric[len(WEBHOOK_SECONDS) + 1:].split("{", 1)[0]
        if kind not in ("sum", "count") or 'name="' not in metric:
            continue
        name = metric.split('name="', 1)[1].split('"', 1)[0]
        total = totals.setdefault(name, [0.0, 0.0])
        total[0 if kind == "sum" else 1] += float(value)
    return {name: (seconds, int(calls)) for name, (seconds, calls) in totals.items()}


class Webhook:
    """A webhook in a process of its own, registered for one namespace, and its figures."""

    def __init__(self, apiserver: Any, kube: Any, namespace: str, workdir: Path, *,
                 jobs: bool = False) -> None:
        context = multiprocessing.get_context("spawn")
        self.namespace = namespace
        self.pipe, child = context.Pipe()
        workdir.mkdir(parents=True, exist_ok=True)
        self.process: Any = context.Process(
            target=serve_webhook, daemon=True,
            args=(apiserver.url, apiserver.token, str(apiserver.ca_file), str(workdir), child,
                  namespace))
        self.process.start()
        if not self.pipe.poll(60):
            raise SystemExit(f"the webhook process for {namespace} never came up")
        port, ca_pem, conditions = self.pipe.recv()
        register_webhook(kube, f"bench-{namespace}", namespace, port, ca_pem, jobs=jobs,
                         conditions=conditions)

    def figures(self) -> tuple[float, list[float], int, float]:
        """CPU seconds so far, the reviews' seconds since the last call, connections so far,
        seconds its threads waited for a CPU so far."""
        self.pipe.send("figures")
        cpu, reviews, connections, waited = self.pipe.recv()
        return cpu, reviews, connections, waited

    def wait_called(self, api: ApiClient) -> None:
        """Until the API server calls it (a dry-run create shows up as a review); one that is
        never called (``NEVER``) is given the time the others take to show up."""
        if self.namespace == NEVER:
            time.sleep(2)
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            api.create(self.namespace, pod_body("probe-x", 0, "gang"), dry_run=True)
            if self.figures()[1]:
                return
            time.sleep(0.2)
        raise SystemExit(f"the API server never called the webhook for {self.namespace}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(10)


class DeployedWebhook(Webhook):
    """``fluence webhook`` as deployed by the tree of interpreter ``python``
    (``webhook_process.py``), registered for one namespace, and its figures."""

    def __init__(self, apiserver: Any, kube: Any, namespace: str, workdir: Path, *,
                 python: str, jobs: bool = False) -> None:
        import subprocess

        self.namespace = namespace
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = open(workdir / "webhook.log", "wb")  # noqa: SIM115 - closed by stop
        self.process = subprocess.Popen(
            [python, str(Path(__file__).resolve().parent / "webhook_process.py"),
             apiserver.url, apiserver.token, str(apiserver.ca_file), str(workdir), namespace],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=workdir)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        line = self.stdout.readline()
        if not line:
            raise SystemExit(f"the webhook process for {namespace} ({python}) never came up:"
                             f" see {workdir / 'webhook.log'}")
        started = json.loads(line)
        self.calls: dict[str, int] = {}
        """Its API calls and watch events so far, by method and kind (at the last figures)."""
        register_webhook(kube, f"bench-{namespace}", namespace, started["port"],
                         started["ca"].encode(), jobs=jobs)

    def figures(self) -> tuple[float, list[float], int, float]:
        self.stdin.write("figures\n")
        self.stdin.flush()
        cpu, reviews, connections, waited, self.calls = json.loads(self.stdout.readline())
        return cpu, reviews, connections, waited

    def stop(self) -> None:
        self.stdin.close()
        try:
            self.process.wait(15)
        except Exception:  # noqa: BLE001 - a webhook that does not stop is ended
            self.process.kill()
            self.process.wait(10)
        self.log.close()


PATHS = {PLAIN: "without", NATIVE: "without, client makes PodGroups", NULL: "null webhook",
         PATCHED: "null webhook, Fluence's patch", HOOKED: "with",
         INLINE: "with, inline writes", DEPLOYED: "with, as deployed",
         DEPLOYED_BASE: "with, as deployed, baseline's tree",
         SKIPPING: "with, generated matchConditions",
         NEVER: "null webhook, condition false", POLICY: "no webhook, a policy's patch"}
"""Each path's label: no webhook; no webhook, the client making each gang's PodGroup and
pointing its pods at it (what the same gangs cost without Fluence); a webhook that allows
everything unchanged; the same answering with Fluence's patch (no PodGroup); Fluence's;
Fluence's making its PodGroups on the request path (as before issue 20's background
writer)."""
BY_NAME = {"plain": PLAIN, "native": NATIVE, "null": NULL, "patched": PATCHED, "hooked": HOOKED,
           "inline": INLINE, "deployed": DEPLOYED, "deployed-base": DEPLOYED_BASE,
           "skipping": SKIPPING, "never": NEVER, "policy": POLICY}


class Profiles:
    """py-spy sampling each webhook process while it is measured (``--profile DIR``): one file
    of collapsed stacks per path (``<path>.txt``, py-spy's raw format, one stack and its
    sample count a line), written when sampling stops."""

    def __init__(self, directory: Path | None, hooks: dict[str, Webhook]) -> None:
        import shutil
        import subprocess

        self.samplers: list[subprocess.Popen[bytes]] = []
        if directory is None:
            return
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        directory.mkdir(parents=True, exist_ok=True)
        for namespace, hook in hooks.items():
            self.samplers.append(subprocess.Popen(
                [py_spy, "record", "--pid", str(hook.process.pid), "--rate", "250",
                 "--gil", "--format", "raw", "--output", str(directory / f"{namespace}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        for sampler in self.samplers:
            sampler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for sampler in self.samplers:
            sampler.wait(30)


def through_apiserver(assets: Path, shape: str, counts: dict[int, int], repeats: int,
                      paths: list[str], profile: Path | None = None,
                      baseline: str | None = None) -> list[dict[str, Any]]:
    """Each client count's creates on every one of ``paths``, alternated ``repeats`` times;
    the table printed, the figures returned. ``profile``: py-spy samples every webhook;
    ``baseline``: the interpreter of the baseline tree's venv (path ``DEPLOYED_BASE``)."""
    from fluence_core.testing_apiserver import ensure_namespace, start_apiserver

    workdir = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
    results: list[dict[str, Any]] = []
    with start_apiserver(assets, workdir / "apiserver", controller_manager=False) as apiserver:
        kube = apiserver.cluster(qps=1000, burst=1000)
        for namespace in paths:
            ensure_namespace(kube, namespace)
        hooks: dict[str, Webhook] = {}
        for namespace in paths:
            jobs = shape == "job" and namespace in (HOOKED, INLINE, SKIPPING, *DEPLOYED_PATHS)
            if namespace in DEPLOYED_PATHS:
                python = sys.executable if namespace == DEPLOYED else baseline
                assert python is not None
                hooks[namespace] = DeployedWebhook(apiserver, kube, namespace,
                                                   workdir / namespace, python=python,
                                                   jobs=jobs)
            elif namespace not in (PLAIN, NATIVE, POLICY):
                hooks[namespace] = Webhook(apiserver, kube, namespace, workdir / namespace,
                                           jobs=jobs)
        if POLICY in paths:
            register_policy(kube, POLICY)
            wait_policy(ApiClient(apiserver.url, apiserver.token,
                                  ssl.create_default_context(cafile=str(apiserver.ca_file))))
        try:
            context = ssl.create_default_context(cafile=str(apiserver.ca_file))
            for hook in hooks.values():
                hook.wait_called(ApiClient(apiserver.url, apiserver.token, context))
            profiles = Profiles(profile, hooks)
            print(f"through kube-apiserver ({assets}), {shape} pods, each webhook in its own"
                  " process")
            print("| clients | path | creates | creates/s | p50 | p99 | errors |")
            print("|---|---|---|---|---|---|---|")
            pids = [p.pid for p in apiserver.processes.values()]
            before, started = sum(map(process_cpu, pids)), time.perf_counter()
            time.sleep(3)
            idle = (sum(map(process_cpu, pids)) - before) / (time.perf_counter() - started)
            for clients, count in counts.items():
                phases = {namespace: Phase() for namespace in paths}
                hook_before = {ns: hook.figures() for ns, hook in hooks.items()}
                calls_before = {ns: dict(getattr(hook, "calls", {}))
                                for ns, hook in hooks.items()}
                scraper = ApiClient(apiserver.url, apiserver.token, context)
                seconds_before = webhook_seconds(scraper)  # outside the CPU windows below
                run_phase(apiserver.url, apiserver.token, context, PLAIN, clients,
                          min(count, 50), f"warm{clients}", shape, Phase())
                control_plane = {namespace: 0.0 for namespace in phases}
                control_wait = {namespace: 0.0 for namespace in phases}
                for repeat in range(repeats):
                    order = list(phases.items())  # each repeat starts one path later: no
                    order = order[repeat % len(order):] + order[:repeat % len(order)]
                    for namespace, phase in order:  # path always follows the same one
                        waited = sum(map(run_queue_wait, pids))
                        before, started = sum(map(process_cpu, pids)), time.perf_counter()
                        run_phase(apiserver.url, apiserver.token, context, namespace, clients,
                                  count, f"c{clients}r{repeat}", shape, phase)
                        control_plane[namespace] += (sum(map(process_cpu, pids)) - before
                                                     - idle * (time.perf_counter() - started))
                        control_wait[namespace] += sum(map(run_queue_wait, pids)) - waited
                hook_after = {ns: hook.figures() for ns, hook in hooks.items()}
                calls = calls_made(seconds_before, webhook_seconds(scraper))
                scraper.conn.close()
                result = phase_result(clients, phases, control_plane, hook_before, hook_after,
                                      calls, control_wait)
                for ns, hook in hooks.items():  # what each deployed webhook asked of the server
                    if isinstance(hook, DeployedWebhook):
                        made = max(1, len(phases[ns].latencies))
                        result["paths"][PATHS[ns]]["webhook_api_calls_per_create"] = {
                            key: (count - calls_before[ns].get(key, 0)) / made
                            for key, count in sorted(hook.calls.items())
                            if count != calls_before[ns].get(key, 0)}
                for namespace in paths:
                    label = PATHS[namespace]
                    row = result["paths"][label]
                    print(f"| {clients} | {label} | {row['creates']} | {row['creates_per_s']:.0f}"
                          f" | {row['p50_ms']:.1f}ms | {row['p99_ms']:.1f}ms | {row['errors']} |")
                results.append(result)
            profiles.stop()
            for result in results:
                print(summary_line(result))
            if shape != "single":  # every gang's PodGroup made, or which path did not
                for namespace in paths:
                    made = len(kube.list("podgroups", namespace).items)
                    print(f"PodGroups in {PATHS[namespace]!r}'s namespace at the end: {made}")
        finally:
            for hook in hooks.values():
                hook.stop()
            kube.close()
    return results


def calls_made(before: dict[str, tuple[float, int]],
               after: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
    """Per webhook name, the API server's seconds and calls between two scrapes."""
    return {name: (seconds - before.get(name, (0.0, 0))[0], calls - before.get(name, (0.0, 0))[1])
            for name, (seconds, calls) in after.items()}


def phase_result(clients: int, phases: dict[str, Phase], control_plane: dict[str, float],
                 hook_before: dict[str, tuple[float, list[float], int, float]],
                 hook_after: dict[str, tuple[float, list[float], int, float]],
                 calls: dict[str, tuple[float, int]],
                 control_wait: dict[str, float]) -> dict[str, Any]:
    """One client count's figures: per path, and what each webhook adds to the plain path."""
    paths: dict[str, Any] = {}
    for namespace, phase in phases.items():
        label = PATHS[namespace]
        cut = latency_summary(phase.latencies)
        made = max(1, len(phase.latencies))
        row: dict[str, Any] = {
            "creates": len(phase.latencies), "errors": len(phase.errors),
            "first_errors": phase.errors[:3], "creates_per_s": phase.rate,
            **{f"{k}_ms": v * 1000 for k, v in cut.items()},
            "control_plane_cpu_ms_per_create": control_plane[namespace] / made * 1000,
            "control_plane_cpu_wait_ms_per_create": control_wait[namespace] / made * 1000,
        }
        if namespace in hook_after:
            cpu_before, _, connections_before, wait_before = hook_before[namespace]
            cpu_after, reviews, connections_after, wait_after = hook_after[namespace]
            inside = latency_summary(reviews)
            row.update({
                "webhook_cpu_ms_per_create": (cpu_after - cpu_before) / made * 1000,
                "webhook_cpu_wait_ms_per_create": (wait_after - wait_before) / made * 1000,
                "review_p50_ms": inside["p50"] * 1000, "review_p99_ms": inside["p99"] * 1000,
                "review_mean_ms": statistics.fmean(reviews) * 1000 if reviews else 0.0,
                "webhook_connections": connections_after - connections_before,
            })
            seconds, made_calls = calls.get(webhook_name(namespace), (0.0, 0))
            row.update({"apiserver_webhook_calls": made_calls,
                        "apiserver_webhook_mean_ms": seconds / made_calls * 1000
                        if made_calls else 0.0})
        paths[label] = row
    plain = paths[PATHS[PLAIN]]
    added = {}
    for namespace in phases:
        if namespace == PLAIN:
            continue
        row = paths[PATHS[namespace]]
        per_repeat = [mine / theirs for mine, theirs in
                      zip(phases[namespace].rates, phases[PLAIN].rates) if theirs]
        added[PATHS[namespace]] = {
            "added_p50_ms": row["p50_ms"] - plain["p50_ms"],
            "added_p99_ms": row["p99_ms"] - plain["p99_ms"],
            "creates_per_s_ratio": (row["creates_per_s"] / plain["creates_per_s"]
                                    if plain["creates_per_s"] else 0.0),
            "creates_per_s_ratio_median_of_repeats": (statistics.median(per_repeat)
                                                      if per_repeat else 0.0)}
        native = paths.get(PATHS[NATIVE])
        if native is not None and namespace != NATIVE and native["creates_per_s"]:
            added[PATHS[namespace]]["creates_per_s_ratio_vs_native"] = (
                row["creates_per_s"] / native["creates_per_s"])
    return {"clients": clients, "paths": paths, "added": added}


def summary_line(result: dict[str, Any]) -> str:
    """What each webhook adds, and where the CPU and the review's time go."""
    plain = result["paths"][PATHS[PLAIN]]
    lines = []
    for label, added in result["added"].items():
        row = result["paths"][label]
        lines.append(f"clients={result['clients']} {label}: added p50 "
                     f"{added['added_p50_ms']:.1f}ms, added p99 {added['added_p99_ms']:.1f}ms, "
                     f"creates/s with/without {added['creates_per_s_ratio']:.2f}x (median of"
                     f" the repeats' ratios {added['creates_per_s_ratio_median_of_repeats']:.2f}x)")
        if "creates_per_s_ratio_vs_native" in added:
            lines[-1] += (f"; against the client making the PodGroups "
                          f"{added['creates_per_s_ratio_vs_native']:.2f}x")
        cpu = (f"  CPU per create (idle subtracted): kube-apiserver+etcd "
               f"{plain['control_plane_cpu_ms_per_create']:.1f}ms without, "
               f"{row['control_plane_cpu_ms_per_create']:.1f}ms here")
        if "webhook_cpu_ms_per_create" in row:
            cpu += (f", webhook {row['webhook_cpu_ms_per_create']:.2f}ms; waiting for a CPU per"
                    f" create: kube-apiserver+etcd "
                    f"{plain['control_plane_cpu_wait_ms_per_create']:.1f}ms without, "
                    f"{row['control_plane_cpu_wait_ms_per_create']:.1f}ms here, webhook"
                    f" {row['webhook_cpu_wait_ms_per_create']:.2f}ms; a review inside the"
                    f" webhook p50 {row['review_p50_ms']:.1f}ms p99 {row['review_p99_ms']:.1f}ms"
                    f" mean {row['review_mean_ms']:.2f}ms; the API server's call to it (its"
                    f" metric) mean {row['apiserver_webhook_mean_ms']:.2f}ms over"
                    f" {row['apiserver_webhook_calls']} calls; connections the API server"
                    f" opened to it: {row['webhook_connections']}")
            if "webhook_api_calls_per_create" in row:
                cpu += "; its API calls per create: " + ", ".join(
                    f"{key} {per:.3f}" for key, per in row["webhook_api_calls_per_create"].items())
        lines.append(cpu)
    for label, row in result["paths"].items():
        if row["errors"]:
            lines.append(f"  {label}: first errors {row['first_errors']}")
    return "\n".join(lines)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (what ``uptime`` shows; the machine is shared)."""
    return list(os.getloadavg())


def baseline_wanted(ref: str | None, chosen: list[str], parser: argparse.ArgumentParser) -> bool:
    """Whether a chosen path runs the baseline's tree; an error if one does and no ``ref``
    says which."""
    wanted = DEPLOYED_BASE in chosen
    if ref is None and wanted:
        parser.error("path deployed-base needs --baseline REF")
    return wanted


def main() -> None:
    from fluence_core.testing_apiserver import find_assets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("both", "inprocess", "apiserver", "review"),
                        default="both", help="review: CPU per review in process, no HTTP")
    parser.add_argument("--clients", type=int, default=50, help="in process")
    parser.add_argument("--requests", type=int, default=10_000, help="in process")
    parser.add_argument("--pods", choices=("gang", "single", "job"), default="gang",
                        help="through the API server: members of gangs of 4, lone pods, or"
                             " the pods of Indexed Jobs of 4 as the job controller makes them"
                             " (each Job created first; Fluence's webhook also sees the Jobs)")
    parser.add_argument("--creates", type=int, default=60,
                        help="through the API server: creates per repeat and path with one"
                             " client (x5 with 20 clients)")
    parser.add_argument("--repeats", type=int, default=10,
                        help="through the API server: alternations of the paths per client count"
                             " (short and many: the machine's load drifts)")
    parser.add_argument("--paths", default="plain,native,null,patched,hooked,inline",
                        help="through the API server, of: plain (no webhook), native (no"
                             " webhook, the client makes each gang's PodGroup), null (a webhook"
                             " allowing everything), patched (the null webhook answering with"
                             " Fluence's patch, no PodGroup), hooked (Fluence's), inline (Fluence's"
                             " with PodGroups made on the request path), skipping (Fluence's,"
                             " registered with the matchConditions its handlers declare), never"
                             " (the null webhook, its condition never true), policy (no webhook:"
                             " a MutatingAdmissionPolicy gives gang pods Fluence's patch),"
                             " deployed (fluence webhook's make_server, as deployed, in a"
                             " process of this tree's interpreter), deployed-base (the same,"
                             " run by --baseline's whole tree)")
    parser.add_argument("--baseline", metavar="REF", default=None,
                        help="through the API server: path deployed-base runs git REF's whole"
                             " tree (a temporary worktree with a venv of its own, made with"
                             " its requirements-dev.txt; --baseline-venv keeps it); --mode"
                             " review: review.py at REF")
    parser.add_argument("--baseline-dir", type=Path, default=None, metavar="DIR",
                        help="keep --baseline's worktree and venv in DIR and reuse them in"
                             " later runs (made on the first), instead of a temporary one")
    parser.add_argument("--client-counts", default="1,20",
                        help="through the API server: the client counts, in order (creates"
                             " per repeat: --creates with 1, x5 with more)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="through the API server: py-spy (on PATH or beside this Python)"
                             " samples each webhook process; collapsed stacks in DIR/<path>.txt")
    parser.add_argument("--json", type=Path, default=Path("bench-webhook.json"),
                        help="write every figure here (with the machine's load averages)")
    args = parser.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": load_average(),
                              "shape": args.pods}
    if args.mode == "review":
        report["review_cpu_ms"] = review_cpu(args.baseline)
    if args.mode in ("both", "inprocess"):
        report["in_process"] = in_process(args.clients, args.requests)
    if args.mode in ("both", "apiserver"):
        assets, reason = find_assets()
        if assets is None:
            print(f"through a real API server: skipped ({reason})")
            report["apiserver"] = {"skipped": reason}
        else:
            chosen = [BY_NAME[name] for name in args.paths.split(",")]
            if PLAIN not in chosen:
                parser.error("--paths must include plain, the baseline")
            counts = {int(n): args.creates * (1 if int(n) == 1 else 5)
                      for n in args.client_counts.split(",")}
            wanted = baseline_wanted(args.baseline, chosen, parser)
            with baseline_tree(args.baseline if wanted else None, keep=args.baseline_dir) as base:
                python = None if base is None else str(baseline_python(base))
                report["apiserver"] = through_apiserver(
                    assets, args.pods, counts, args.repeats, chosen, args.profile, python)
    report["load_after"] = load_average()
    print(f"load averages (1, 5, 15 min): before {report['load_before']}, "
          f"after {report['load_after']} on {report['cpus']} CPUs")
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
