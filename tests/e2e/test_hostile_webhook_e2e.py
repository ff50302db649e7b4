"""Hostile input to the webhook's newer parts, on a real kube-apiserver (skipped without
KUBEBUILDER_ASSETS).

* The scouts' report endpoint (``POST /v1/scout-report``) answers every bad request, one at a
  time or in a flood, with a JSON error naming what is wrong, and the webhook goes on
  admitting pods.
* The orphan sweep and the repair of lost PodGroups survive API errors (a real 403: the
  process has lost its rights) and odd pods (a pod deleted between the list and the write, a
  group size that is not a number, a group label that is no PodGroup name) with a log line,
  and do their work once the cause is gone.
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import Settings, load_settings
from fluence_core.testing import job_owner, make_pod_dict
from fluence_core.testing_apiserver import (
    ApiServer,
    ensure_namespace,
    find_kubectl,
    wait_for,
    webhook_beside,
)
from fluence_core.webhook import BackgroundWriter, build_service
from fluence_core.hybrid.orphans import OrphanSweep
from fluence_core.webhook.controller.repair import PodGroupRepair
from fluence_core.hybrid.endpoint import MAX_REPORT
from fluence_core.webhook.main import Webhook

pytestmark = pytest.mark.e2e

FOUND = json.dumps({"event": "found", "jobId": "t-1"}).encode()
"""A well-formed report."""
INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE  # a hostile client checks nothing


@dataclass
class Served:
    kube: KubeCluster
    namespace: str
    server: Webhook


@pytest.fixture(scope="module")
def served(kube: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The webhook with its report endpoint, registered for pods in one namespace."""
    namespace = ensure_namespace(kube, "hostile-reports")
    settings = load_settings(webhook_config="fluence-hostile-reports",
                             runtime_image="example.org/fluence:e2e")
    with webhook_beside(kube, settings, tmp_path_factory.mktemp("hostile-reports"),
                        namespace=namespace) as server:
        yield Served(kube, namespace, server)


def post(port: int, headers: dict[str, str], body: bytes = b"",
         path: str = names.REPORT_PATH) -> tuple[int, str, dict[str, Any]]:
    """Status, Content-Type and JSON body of one raw POST (headers sent exactly as given)."""
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=INSECURE, timeout=60)
    try:
        connection.putrequest("POST", path, skip_accept_encoding=True)
        for key, value in headers.items():
            connection.putheader(key, value)
        connection.endheaders(body or None)  # one write: the server may answer after the headers
        response = connection.getresponse()
        data = response.read()
        return response.status, response.getheader("Content-Type") or "", json.loads(data)
    finally:
        connection.close()


def report(body: bytes, authorization: str | None = "Bearer forged.jwt.token",
           **headers: str) -> dict[str, str]:
    sent = {"Content-Length": str(len(body)), "Content-Type": "application/json", **headers}
    if authorization is not None:
        sent["Authorization"] = authorization
    return sent


def unbound_token(kube: KubeCluster, namespace: str, apiserver: ApiServer) -> str | None:
    """A real token of ServiceAccount ``default`` for Fluence's audience, bound to no pod."""
    kubectl = find_kubectl()
    if kubectl is None:
        return None
    done = subprocess.run([str(kubectl), f"--kubeconfig={apiserver.kubeconfig()}", "-n",
                           namespace, "create", "token", "default",
                           f"--audience={Settings().hybrid.report_audience}"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_every_bad_report_gets_a_json_error_naming_what_is_wrong(
    served: Served, apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    cases: list[tuple[str, dict[str, str], bytes, int, str]] = [
        ("no Authorization header", report(FOUND, None), FOUND, 401, "Bearer <token>"),
        ("Basic credentials", report(FOUND, "Basic YTpi"), FOUND, 401, "Bearer <token>"),
        ("a made-up bearer token (a real TokenReview says no)", report(FOUND), FOUND, 401,
         "not valid for audience"),
        ("a body over the limit, declared and not sent",
         {"Content-Length": str(10**9), "Authorization": "Bearer x"}, b"", 413,
         f"exceeds {MAX_REPORT}"),
        ("no Content-Length", {"Authorization": "Bearer x"}, b"", 411, "Content-Length"),
        ("a chunked body", {"Transfer-Encoding": "chunked", "Authorization": "Bearer x"},
         b"0\r\n\r\n", 411, "not chunked"),
        ("a Content-Length that is no number", {"Content-Length": "ten"}, b"", 400,
         "bad Content-Length 'ten'"),
        ("malformed JSON", report(b"{not json"), b"{not json", 400, "bad report"),
        ("JSON nested 10,000 deep", report(b"[" * 10_000), b"[" * 10_000, 400,
         "nests too deeply"),
        ("a body that is not UTF-8", report(b"\xff\xfe"), b"\xff\xfe", 400, "bad report"),
        ("JSON that is not an object", report(b"[]"), b"[]", 400, "must be a JSON object"),
        ("an event nobody sends", report(b'{"event": "launch"}'), b'{"event": "launch"}', 400,
         "'event' must be one of"),
    ]
    token = unbound_token(served.kube, served.namespace, apiserver)
    if token is not None:
        cases.append(("a real ServiceAccount token for Fluence, bound to no pod",
                      report(FOUND, f"Bearer {token}"), FOUND, 403,
                      "not a ServiceAccount token bound to a pod"))
    caplog.set_level(logging.WARNING, logger=names.LOGGER_NAME)
    for what, headers, body, status, words in cases:
        got, kind, answer = post(served.server.report_port, headers, body)
        assert (got, kind) == (status, "application/json"), (what, got, answer)
        assert answer["code"] == status and words in answer["error"], (what, answer)
    # A body over the limit actually sent: refused after the headers and never read. The answer
    # leaves before the upload ends, so the client may see it or, mid-upload, the close.
    oversized = b'{"event": "found", "jobId": "' + b"x" * MAX_REPORT + b'"}'
    try:
        got, kind, answer = post(served.server.report_port, report(oversized), oversized)
    except (ssl.SSLError, OSError):
        pass
    else:
        assert (got, answer["code"]) == (413, 413), answer
        assert f"body of {len(oversized)} bytes exceeds {MAX_REPORT}" in answer["error"], answer
    assert post(served.server.report_port, report(b"[]"), b"[]")[0] == 400  # and serves the next
    # The refusals that got as far as reading the report are logged, with their reason.
    logged = [r.getMessage() for r in caplog.records if "scout report refused" in r.getMessage()]
    assert any("nests too deeply" in line for line in logged), logged
    assert any("not valid for audience" in line for line in logged), logged


def test_a_flood_of_bad_reports_is_answered_and_pods_are_still_admitted(
    served: Served,
) -> None:
    bodies = [
        (report(FOUND), FOUND, 401),
        (report(FOUND, None), FOUND, 401),
        (report(b"[" * 10_000), b"[" * 10_000, 400),
        ({"Content-Length": str(MAX_REPORT + 1), "Authorization": "Bearer x"}, b"", 413),
    ]

    def one(index: int) -> tuple[int, int]:
        headers, body, expected = bodies[index % len(bodies)]
        status, _kind, answer = post(served.server.report_port, headers, body)
        assert answer["code"] == status
        return expected, status

    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = Counter(pool.map(one, range(400)))
    assert all(expected == got for expected, got in outcomes), outcomes
    assert sum(outcomes.values()) == 400
    # The webhook still admits: a grouped pod gets its PodGroup and its scheduling group.
    served.kube.create("pods", make_pod_dict("after-flood", None, namespace=None,
                                             labels={names.GROUP_LABEL: "after-flood"}),
                       served.namespace)
    stored = served.kube.get("pods", "after-flood", served.namespace)
    assert stored["spec"]["schedulingGroup"] == {"podGroupName": "after-flood"}
    wait_for(lambda: served.kube.get("podgroups", "after-flood", served.namespace),
             "the PodGroup of the pod admitted after the flood")
    connection = http.client.HTTPSConnection("127.0.0.1", served.server.report_port,
                                             context=INSECURE, timeout=30)
    connection.request("GET", "/healthz")
    assert connection.getresponse().read() == b"ok"
    connection.close()


# -- the orphan sweep and the repair ---------------------------------------------------------


class Deleting:
    """The real cluster, but once ``victim`` is set the next pod list deletes it after listing
    it: a pod deleted between the loop's list and its write (as a user or a Job may)."""

    def __init__(self, kube: KubeCluster, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.victim: str | None = None
        self.deleted = False

    def __getattr__(self, verb: str) -> Any:
        return getattr(self.kube, verb)

    def list(self, resource: Any, namespace: str | None = None, **selectors: Any) -> Any:
        listed = self.kube.list(resource, namespace, **selectors)
        if getattr(resource, "plural", resource) == "pods" and self.victim and not self.deleted:
            assert self.kube.delete("pods", self.victim, self.namespace, grace_period_seconds=0)
            self.deleted = True
        return listed


def a_job(kube: KubeCluster, namespace: str, name: str, pods: int) -> dict[str, Any]:
    """The controller of a test's shared group: a Job of ``pods`` whose selector matches the
    test's own pods (label ``e2e-job``), so the job controller takes them as its active pods
    and neither makes nor releases any."""
    labels = {"e2e-job": name}
    return kube.create("jobs", {"metadata": {"name": name}, "spec": {
        "parallelism": pods, "completions": pods, "manualSelector": True,
        "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                                                          "spec": {
            "restartPolicy": "Never", "containers": [{"name": "app", "image": "busybox"}]}}}},
        namespace)


def shared_pod(name: str, group: str, role: str, *, gated: bool,
               job: dict[str, Any]) -> dict[str, Any]:
    """A pod of a shared quantum group as the webhook leaves it (role and group labels, the
    gate on a worker), one of ``job``'s pods (a split's pods are one Job's), stored where no
    webhook runs."""
    return make_pod_dict(
        name, None, namespace=None, gates=[names.QUANTUM_GATE] if gated else (),
        labels={names.GROUP_LABEL: group, names.ROLE_LABEL: role,
                "e2e-job": job["metadata"]["name"]},
        owners=[job_owner(job["metadata"]["name"], job["metadata"]["uid"])])


def gates(kube: KubeCluster, name: str, namespace: str) -> list[str]:
    pod = kube.get("pods", name, namespace)
    assert pod is not None, name
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def test_the_orphan_sweep_survives_a_pod_deleted_mid_sweep_and_odd_labels(
    kube: KubeCluster, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    ns = kube_namespace
    # "Odd_Group.x" is a valid label value and no valid PodGroup name: the sweep needs none.
    jobs = {group: a_job(kube, ns, job, pods) for group, job, pods in (
        ("Odd_Group.x", "odd", 3), ("vanishing", "vanishing", 1), ("kept", "kept", 2))}
    for name, group in (("w-0", "Odd_Group.x"), ("w-1", "Odd_Group.x"), ("w-2", "Odd_Group.x"),
                        ("v-0", "vanishing")):
        kube.create("pods", shared_pod(name, group, names.ROLE_WORKER, gated=True,
                                       job=jobs[group]), ns)
    kube.create("pods", shared_pod("s-0", "kept", names.ROLE_SCOUT, gated=False,
                                   job=jobs["kept"]), ns)
    kube.create("pods", shared_pod("k-1", "kept", names.ROLE_WORKER, gated=True,
                                   job=jobs["kept"]), ns)
    cluster = Deleting(kube, ns)
    sweep = OrphanSweep(cluster, load_settings(orphan_sweep=0.2))  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger=names.LOGGER_NAME)
    sweep.sweep()  # the first sweep only suspects
    assert all(gates(kube, n, ns) == [names.QUANTUM_GATE] for n in ("w-0", "w-1", "w-2", "v-0"))
    kube.delete("pods", "v-0", ns, grace_period_seconds=0)  # gone before the second sweep
    cluster.victim = "w-1"  # listed by the second sweep, gone when it writes
    sweep.sweep()
    assert cluster.deleted and kube.get("pods", "w-1", ns) is None
    assert gates(kube, "w-0", ns) == gates(kube, "w-2", ns) == []
    assert f"ungating {ns}/w-1: the pod is gone" in caplog.text
    assert gates(kube, "k-1", ns) == [names.QUANTUM_GATE]  # its scout lives
    for name in ("w-0", "w-2"):
        notes = kube.get("pods", name, ns)["metadata"]["annotations"]
        assert notes[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_LOST
    assert any("group " + ns + "/Odd_Group.x lost its scout" in r.getMessage()
               for r in caplog.records), caplog.text


def no_rights_cluster(apiserver: ApiServer, kube: KubeCluster, namespace: str,
                      account: str) -> KubeCluster:
    """A cluster wrapper logged in as a fresh ServiceAccount that may do nothing yet."""
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("no kubectl beside the API server binaries or on PATH (kubectl create token)")
    kube.create("serviceaccounts", {"metadata": {"name": account}}, namespace)
    done = subprocess.run([str(kubectl), f"--kubeconfig={apiserver.kubeconfig()}", "-n",
                           namespace, "create", "token", account], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return KubeCluster.from_token(apiserver.url, done.stdout.strip(), ca_file=apiserver.ca_file,
                                  qps=1000, burst=1000)


def grant_everything(kube: KubeCluster, namespace: str, account: str) -> str:
    name = f"fluence-hostile-{namespace}"
    kube.create("clusterrolebindings", {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    return name


def test_the_loops_log_a_forbidden_api_and_recover_when_rights_return(
    apiserver: ApiServer, kube: KubeCluster, kube_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Both loops run as ``fluence webhook`` runs them, as an account without rights: every
    pass is a real 403. Each logs it and keeps going; once the account may act, each does its
    job (the repair makes a lost PodGroup, the sweep releases an orphaned worker), and a group
    whose size is no number (sorted first) is logged and skipped without holding up the
    others."""
    ns = kube_namespace
    powerless = no_rights_cluster(apiserver, kube, ns, "powerless")
    settings = load_settings(orphan_sweep=0.2, webhook_repair_interval=0.2)
    writer = BackgroundWriter()
    service = build_service(settings, get_plugin_manager(settings), powerless, writer=writer)
    repair = PodGroupRepair(service, writer, powerless, settings.webhook.repair_interval)
    sweep = OrphanSweep(powerless, settings)
    for name, size in (("bad-size-0", "many"), ("lost-0", "2"), ("lost-1", "2")):
        group = name.rsplit("-", 1)[0]
        kube.create("pods", make_pod_dict(name, None, namespace=None, group=group,
                                          labels={names.GROUP_LABEL: group},
                                          annotations={names.GROUP_SIZE_ANNOTATION: size}), ns)
    kube.create("pods", shared_pod("orphan-1", "orphan", names.ROLE_WORKER, gated=True,
                                   job=a_job(kube, ns, "orphan", 1)), ns)
    caplog.set_level(logging.INFO, logger=names.LOGGER_NAME)
    binding = None
    try:
        repair.start()
        sweep.start()
        wait_for(lambda: "orphan sweep: cannot list" in caplog.text
                 and "looking for missing PodGroups failed" in caplog.text,
                 "a log line of each loop saying its list was refused")
        assert "403" in caplog.text or "Forbidden" in caplog.text, caplog.text
        assert repair.running and sweep.running  # each logged its failure and went on
        assert kube.get("podgroups", "lost", ns) is None
        binding = grant_everything(kube, ns, "powerless")
        group = wait_for(lambda: kube.get("podgroups", "lost", ns), "the lost PodGroup, repaired")
        assert group["spec"]["schedulingPolicy"]["gang"] == {"minCount": 2}
        wait_for(lambda: not gates(kube, "orphan-1", ns), "the orphaned worker, released")
        wait_for(lambda: f"PodGroup {ns}/bad-size is missing, but pod" in caplog.text
                 and "cannot say its size" in caplog.text, "the group of no size, logged")
        assert kube.get("podgroups", "bad-size", ns) is None
    finally:
        repair.stop()
        sweep.stop()
        writer.close()
        if binding is not None:
            kube.delete("clusterrolebindings", binding)
        powerless.close()


def test_a_list_error_mid_pass_is_logged_and_the_next_pass_runs(
    kube: KubeCluster, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An API server that fails a list once (a 500, a timeout) costs one pass, not the loop."""
    ns = kube_namespace

    class FailingOnce:
        def __init__(self) -> None:
            self.failed = threading.Event()

        def __getattr__(self, verb: str) -> Any:
            return getattr(kube, verb)

        def list(self, resource: Any, namespace: str | None = None, **selectors: Any) -> Any:
            if not self.failed.is_set():
                self.failed.set()
                raise ApiError(500, "etcdserver: request timed out", "InternalError")
            return kube.list(resource, namespace, **selectors)

    cluster = FailingOnce()
    settings = load_settings(webhook_repair_interval=0.2)
    writer = BackgroundWriter()
    service = build_service(settings, get_plugin_manager(settings), kube, writer=writer)
    repair = PodGroupRepair(service, writer, cluster, 0.2)  # type: ignore[arg-type]
    kube.create("pods", make_pod_dict("again-0", None, namespace=None, group="again",
                                      labels={names.GROUP_LABEL: "again"}), ns)
    caplog.set_level(logging.ERROR, logger=names.LOGGER_NAME)
    try:
        repair.start()
        wait_for(lambda: kube.get("podgroups", "again", ns), "the PodGroup, on the next pass")
        assert cluster.failed.is_set()
        assert "looking for missing PodGroups failed" in caplog.text
        assert "etcdserver: request timed out" in caplog.text
    finally:
        repair.stop()
        writer.close()
