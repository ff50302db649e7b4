"""The hybrid flow, whole, against a real kube-apiserver (skipped without KUBEBUILDER_ASSETS).

Everything Kubernetes is real: the API server calls the webhook over HTTPS,
the job controller makes the Indexed Job's pods (when kube-controller-manager
is among the assets; else the pods are made as it would make them), and the
scheduler runs in a thread exactly as ``fluence up`` runs it. The sidecar holds
no Kubernetes rights: it reports over HTTPS to the webhook's ``/v1/scout-report``
with a token the API server issued (TokenRequest) for the scout's own
ServiceAccount, bound to the scout pod, for Fluence's audience: what the kubelet
mounts from the projected volume the webhook injected. The webhook checks it
with a real TokenReview and ungates the workers itself.

The sidecar is configured from exactly the env the webhook wrote into its
container, resolved against the stored pod as the kubelet would resolve the
downward API, but for three things only a kubelet and cluster DNS provide: the
token's file, the emptyDir, and the Service's name (the URL names the webhook's
loopback port instead). The vendor queue is a fake (scripted, virtual time).
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_core import names
from fluence_core.kube.api import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.kube.downward import container_env
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import Conflict
from fluence_core.kube.manifests import read_objects
from fluence_core.plugins import get_plugin_manager
from fluence_core.runtime.fake_provider import FakeQueueProvider, FakeTask
from fluence_core.runtime.provider import collect_providers
from fluence_core.hybrid.reporter import HttpsReporter, ReportError
from fluence_core.hybrid.sidecar import Outcome, VirtualClock, sidecar_from_env
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import (
    indexed_job_pods, make_device_request, make_node_dict, make_resource_claim_dict,
)
from fluence_core.testing_apiserver import (
    ApiServer,
    find_kubectl,
    scheduler_beside,
    wait_for,
    webhook_beside,
)
from fluence_core.webhook.main import Webhook
from fluence_dra_qpu.driver import QpuDriver
from fluence_dra_qpu.kubelet import Preparer
from fluence_dra_qpu.protocol import dra_pb2
from fluence_dra_qpu.publisher import SlicePublisher
from tests.hybrid.case import RESOURCES, SCRIPT, sidecar_settings_from

from tests.hybrid.test_flow import assert_released_worker
from tests.hybrid.test_claims_flow import claim_job

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


class Flow:
    """One namespace's webhook, nodes and scheduler thread on the session's API server."""

    def __init__(self, server: ApiServer, kube: KubeCluster, namespace: str, work: Path) -> None:
        self.server, self.kube, self.ns, self.work = server, kube, namespace, work
        self.nodes: list[str] = []
        self.started = time.monotonic()
        self.log: list[str] = []
        resources = work / "resources.yaml"
        resources.write_text(RESOURCES)
        self.settings = load_settings(resources=resources, runtime_image="example.org/fluence:flow",
                                      webhook_config=f"fluence-flow-{namespace}")
        self.webhook = ExitStack()
        self.httpd: Webhook | None = None
        self.scheduling = ExitStack()
        self.scheduler: Scheduler | None = None

    def note(self, what: str) -> None:
        self.log.append(f"[wall {time.monotonic() - self.started:6.2f}s] {what}")

    def start_webhook(self) -> None:
        """Pods and grouped Jobs of this namespace go through the webhook until close."""
        self.httpd = self.webhook.enter_context(
            webhook_beside(self.kube, self.settings, self.work / "tls", namespace=self.ns,
                           resources=("pods", "jobs")))

    def settled(self) -> None:
        """Until the PodGroups of the pods admitted so far are written (after the answers)."""
        assert self.httpd is not None and self.httpd.service.writer is not None
        assert self.httpd.service.writer.flush(timeout=30), "background writes still pending"

    def report_url(self) -> str:
        assert self.httpd is not None
        return f"https://127.0.0.1:{self.httpd.report_port}{names.REPORT_PATH}"

    def node(self, suffix: str, cpu: int = 4) -> None:
        name = f"{self.ns}-{suffix}"
        self.kube.create("nodes", make_node_dict(name, cpu, "16Gi", labels={"e2e-ns": self.ns},
                                                 capacity=True))
        self.nodes.append(name)

    def start_scheduler(self) -> None:
        running = self.scheduling.enter_context(scheduler_beside(self.kube, self.settings))
        self.scheduler = running.scheduler

    def pod(self, name: str) -> dict[str, Any]:
        found = self.kube.get("pods", name, self.ns)
        assert found is not None, name
        return found

    def close(self) -> None:
        self.scheduling.close()
        self.webhook.close()
        # No kubelet ends these pods: remove them now, so no later test's scheduler finds
        # one still holding the backend (the namespace's deletion would wait on them).
        for job in self.kube.list("jobs", self.ns).items:
            self.kube.delete("jobs", job["metadata"]["name"], self.ns, propagation="Orphan")
        for pod in self.kube.list("pods", self.ns).items:
            self.kube.delete("pods", pod["metadata"]["name"], self.ns, grace_period_seconds=0)
        for node in self.nodes:
            self.kube.delete("nodes", node)


@pytest.fixture
def flow(
    apiserver: ApiServer, kube: KubeCluster, kube_namespace: str, tmp_path: Path
) -> Iterator[Flow]:
    made = Flow(apiserver, kube, kube_namespace, tmp_path)
    yield made
    made.close()


ACCOUNT = "ci-deployer"
"""The Job's own ServiceAccount (as IRSA or workload identity would use): the scout keeps it."""
SECRET = "aws-creds"


def submit_job(flow: Flow, claim: dict[str, str] | None = None) -> str:
    """The example Indexed Job of 4, kept to this test's nodes, running as its own
    ServiceAccount, its app reading AWS credentials from a Secret with envFrom; made by the
    job controller when it runs, else its pods are made as the controller would (index
    label + annotation). With ``claim`` (a resourceClaims entry), its QPU is asked for
    through that claim instead of the extended resource."""
    (job,) = read_objects(REPO / "examples" / "quantum-shared-job.yaml", kind="Job")
    if claim is not None:
        job = claim_job(job, claim)
    spec = job["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"e2e-ns": flow.ns}
    spec["serviceAccountName"] = ACCOUNT
    spec["containers"][0]["envFrom"] = [{"secretRef": {"name": SECRET}}]
    flow.kube.create("serviceaccounts", {"metadata": {"name": ACCOUNT}}, flow.ns)
    flow.kube.create("secrets", {"metadata": {"name": SECRET}, "stringData": {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-real-secret"}},
        flow.ns)
    job = flow.kube.create("jobs", job, flow.ns)
    if flow.server.controller_manager:
        wait_for(lambda: len(flow.kube.list("pods", flow.ns).items) == 4,
                 "the job controller's 4 pods")
        made = "job controller"
    else:
        for pod in indexed_job_pods(job):
            flow.kube.create("pods", pod, flow.ns)
        made = "test (as the job controller would)"
    flow.note(f"Indexed Job vqe submitted; 4 pods made by the {made}")
    return made


def by_index(flow: Flow) -> dict[int, str]:
    """Completion index -> pod name (the job controller names pods vqe-<index>-<random>)."""
    return {int(p["metadata"]["labels"][names.JOB_COMPLETION_INDEX]): p["metadata"]["name"]
            for p in flow.kube.list("pods", flow.ns).items}


def issue_token(flow: Flow, pod: dict[str, Any], audience: str, *, bound: bool = True,
                account: str = ACCOUNT) -> str:
    """A TokenRequest by the real API server (kubectl create token): ``account``'s token for
    ``audience``, bound to ``pod`` (name and uid) as the kubelet's projected token is."""
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("no kubectl beside the API server binaries or on PATH")
    argv = [str(kubectl), f"--kubeconfig={flow.server.kubeconfig()}", "-n", flow.ns, "create",
            "token", account, f"--audience={audience}"]
    if bound:
        argv += ["--bound-object-kind=Pod", f"--bound-object-name={pod['metadata']['name']}",
                 f"--bound-object-uid={pod['metadata']['uid']}"]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def reporter_for(flow: Flow, token: str, ca: str) -> HttpsReporter:
    """The sidecar's HTTPS client trusting ``ca`` (the PEM the webhook injected), the token
    in the file the kubelet would mount, the URL at the webhook's loopback port."""
    token_file = flow.work / f"token-{len(list(flow.work.glob('token-*')))}"
    token_file.write_text(token)
    return HttpsReporter(flow.report_url(), token_file, ca)


def test_the_hybrid_flow_end_to_end(flow: Flow, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    kube, ns = flow.kube, flow.ns
    try:
        (priority_class,) = read_objects(REPO / "deploy" / "fluence.yaml", kind="PriorityClass")
        kube.create("priorityclasses", priority_class)
    except Conflict:
        pass
    for suffix in ("n0", "n1", "n2"):
        flow.node(suffix)
    flow.start_webhook()
    submit_job(flow)

    # -- the split, as stored by the API server -------------------------------------------------
    pods = by_index(flow)
    scout_name, worker_names = pods[0], [pods[i] for i in (1, 2, 3)]
    scout = flow.pod(scout_name)
    assert scout["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_SCOUT
    assert scout["spec"]["schedulingGroup"]["podGroupName"] == "vqe-scout"
    assert not scout["spec"].get("schedulingGates")
    assert [c["name"] for c in scout["spec"]["containers"]] == ["app", names.SIDECAR_CONTAINER]
    assert [c["name"] for c in scout["spec"]["initContainers"]] == [names.STAGE_CONTAINER]
    # (a) The pod keeps its ServiceAccount; the sidecar reads the app's credentials the same
    # way (the reference, never the value); nothing was granted to anyone.
    assert scout["spec"]["serviceAccountName"] == ACCOUNT
    app, sidecar = scout["spec"]["containers"]
    assert sidecar["envFrom"] == app["envFrom"] == [{"secretRef": {"name": SECRET}}]
    assert {r: kube.list(r, ns).items for r in ("roles", "rolebindings")} == {
        "roles": [], "rolebindings": []}
    accounts = sorted(a["metadata"]["name"] for a in kube.list("serviceaccounts", ns).items)
    assert accounts == sorted(["default", ACCOUNT])
    token_volume = next(v for v in scout["spec"]["volumes"]
                        if v["name"] == names.REPORT_TOKEN_VOLUME)
    projected = token_volume["projected"]["sources"][0]["serviceAccountToken"]
    assert projected["audience"] == flow.settings.hybrid.report_audience
    flow.note(f"scout keeps ServiceAccount {ACCOUNT}; app envFrom {app['envFrom']}, "
              f"sidecar envFrom {sidecar['envFrom']}; Roles/RoleBindings in {ns}: none; "
              f"ServiceAccounts: {', '.join(accounts)}; projected token audience "
              f"{projected['audience']!r}")
    mount = {"name": names.RUNTIME_VOLUME, "mountPath": names.RUNTIME_MOUNT}
    for container in scout["spec"]["containers"] + scout["spec"]["initContainers"]:
        assert mount in [
            {k: m[k] for k in ("name", "mountPath")} for m in container["volumeMounts"]
        ]
    for name in worker_names:
        worker = flow.pod(name)
        assert worker["spec"]["schedulingGroup"]["podGroupName"] == "vqe"
        assert worker["spec"]["schedulingGates"] == [{"name": names.QUANTUM_GATE}]
        assert worker["spec"]["priorityClassName"] == names.QUANTUM_PRIORITY_CLASS
        assert worker["spec"]["priority"] == priority_class["value"]
        env = {e["name"] for e in worker["spec"]["containers"][0]["env"]}
        assert {names.ENV_SCOUT_JOB_ID, names.ENV_SCOUT_SESSION, names.ENV_SCOUT_STATUS} <= env
    flow.settled()
    groups = {
        g["metadata"]["name"]: g["spec"]["schedulingPolicy"]["gang"]["minCount"]
        for g in kube.list("podgroups", ns).items
        if not g["metadata"].get("deletionTimestamp")
    }
    # The job-group handler named the group on the Job's template, so the job controller
    # (WorkloadWithJob) made no PodGroup of 4 of its own: only Fluence's two exist.
    assert groups == {"vqe-scout": 1, "vqe": 3}
    pointed = {p["spec"]["schedulingGroup"]["podGroupName"] for p in kube.list("pods", ns).items}
    assert pointed == {"vqe-scout", "vqe"}
    flow.note(
        f"webhook split: scout {scout_name} -> PodGroup vqe-scout (1) "
        "with sidecar + staged runtime; "
        f"workers {', '.join(worker_names)} -> PodGroup vqe (minCount 3), gated "
        f"{names.QUANTUM_GATE}, priority {priority_class['value']}"
    )

    # -- the scheduler: the scout goes with its backend, the workers wait holding nothing ------
    flow.start_scheduler()
    scout = wait_for(
        lambda: (p := flow.pod(scout_name))["spec"].get("nodeName") and p, "the scout bound"
    )
    annotations = scout["metadata"]["annotations"]
    assert annotations[names.BACKEND_ANNOTATION] == "sim_qpu"
    assert annotations[names.attr_annotation("provider")] == "fake"
    flow.note(f"scheduler bound scout {scout_name} -> {scout['spec']['nodeName']} "
              f"with backend={annotations[names.BACKEND_ANNOTATION]}")
    time.sleep(2)  # give the scheduler every chance to (wrongly) touch the workers
    for name in worker_names:
        worker = flow.pod(name)
        assert worker["spec"].get("nodeName") is None and worker["status"]["phase"] == "Pending"
    assert names.JOBIDS_ANNOTATION not in (
        kube.get("podgroups", "vqe", ns)["metadata"].get("annotations") or {}
    )

    before = {name: flow.pod(name) for name in worker_names}

    # -- the sidecar: configured from the env the webhook injected ------------------------------
    env = container_env(scout, names.SIDECAR_CONTAINER)
    assert env["FLUENCE_REPORT_CA"].startswith("-----BEGIN CERTIFICATE-----")
    assert env["FLUENCE_REPORT_URL"] == (
        f"https://{flow.settings.webhook.service}.{flow.settings.webhook.namespace}.svc"
        f":{flow.settings.webhook.report_port}{names.REPORT_PATH}")
    assert env[names.ENV_REPORT_TOKEN_FILE] == (
        f"{names.REPORT_TOKEN_MOUNT}/{names.REPORT_TOKEN_FILE}")
    assert not {"KUBERNETES_SERVICE_HOST", "FLUENCE_KUBE_QPS"} & set(env)
    # What only a kubelet and cluster DNS provide: the projected token, the Service's address.
    token_file = flow.work / "projected-token"
    token_file.write_text(issue_token(flow, scout, flow.settings.hybrid.report_audience))
    env[names.ENV_REPORT_TOKEN_FILE] = str(token_file)
    env["FLUENCE_REPORT_URL"] = flow.report_url()
    assert env[names.ENV_POD_UID] == scout["metadata"]["uid"]
    assert (env[names.ENV_POD_NAME], env[names.ENV_POD_NAMESPACE]) == (scout_name, ns)
    assert env[names.ENV_BACKEND] == "sim_qpu" and env["FLUXION_PROVIDER"] == "fake"
    assert env[names.ENV_RUNTIME_DIR] == names.RUNTIME_MOUNT
    runtime = flow.work / "emptydir"
    runtime.mkdir()
    env[names.ENV_RUNTIME_DIR] = str(runtime)  # the emptyDir mounted at names.RUNTIME_MOUNT
    sidecar_settings = sidecar_settings_from(monkeypatch, env)
    reporter = HttpsReporter.from_settings(sidecar_settings)  # what `fluence sidecar` builds
    clock = VirtualClock()
    fake = FakeQueueProvider(clock, {scout["metadata"]["uid"]: FakeTask("fake-task/0001", SCRIPT,
                                                                        session="session-42")})
    real = collect_providers(get_plugin_manager(sidecar_settings))
    sidecar = sidecar_from_env(sidecar_settings, reporter, [*real, fake], clock=clock)
    assert sidecar.provider is fake and sidecar.reporter is reporter

    gated_at: dict[float, bool] = {}
    finished: set[str] = set()

    def on_sleep(now: float) -> None:
        workers = [flow.pod(n) for n in worker_names]
        gated_at[now] = all(w["spec"].get("schedulingGates") for w in workers)
        if gated_at[now]:
            assert not any(w["spec"].get("nodeName") for w in workers), (
                "a gated worker holds a node"
            )
            return
        if not finished:
            bound = wait_for(lambda: all(flow.pod(n)["spec"].get("nodeName") for n in worker_names),
                         "the three workers bound", timeout=30)
            placed = {n: flow.pod(n)["spec"]["nodeName"] for n in worker_names}
            flow.note(f"t={now:g}s (virtual) scheduler bound the 3 workers together: "
                      + ", ".join(f"{n}->{node}" for n, node in placed.items()))
            assert bound
            record = kube.get("podgroups", "vqe", ns)["metadata"].get("annotations") or {}
            assert names.JOBIDS_ANNOTATION in record  # the durable record, on the workers' PodGroup
            for name in worker_names:
                kube.patch_status("pods", name, {"status": {"phase": "Succeeded"}}, ns)
                finished.add(name)
            flow.note("workers finished (phase Succeeded written)")

    clock.on_sleep = on_sleep
    result = sidecar.run()
    for t, position in result.series:
        flow.log.append(f"[virtual {t:4g}s] vendor queue position {position}")
    flow.log.append(
        f"[virtual {result.series[-1][0]:4g}s] sidecar reported 'release' (ready); the "
        f"webhook verified its token and removed gate {names.QUANTUM_GATE} from "
        f"{', '.join(sorted(result.ungated))}"
    )
    assert result.outcome is Outcome.READY and result.exit_code == 0
    assert sorted(result.ungated) == sorted(worker_names)
    assert [p for _, p in result.series] == [7, 4, 2, 1]
    assert (
        gated_at[70] is True and gated_at[80] is False
    )  # released by the poll at t=70 (position 1)
    for name in worker_names:
        after = flow.pod(name)
        assert_released_worker(after)
        # (a) Only the gate went from the spec (and the scheduler's nodeName came).
        assert before[name]["spec"]["schedulingGates"] == [{"name": names.QUANTUM_GATE}]
        unchanged = {k: v for k, v in before[name]["spec"].items() if k != "schedulingGates"}
        assert {k: v for k, v in after["spec"].items()
                if k not in ("schedulingGates", "nodeName")} == unchanged
        # (c) The worker's FLUXION_* read the scout's backend through the downward API.
        wiring = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
                  for e in after["spec"]["containers"][0]["env"] if "valueFrom" in e}
        seen = container_env(after, "app")
        assert wiring[names.ENV_BACKEND] == f"metadata.annotations['{names.BACKEND_ANNOTATION}']"
        assert seen[names.ENV_BACKEND] == annotations[names.BACKEND_ANNOTATION]
        for key in ("provider", "region", "device-arn"):
            variable = names.env_name_for_attribute(key)
            assert seen[variable] == annotations[names.attr_annotation(key)], variable
        flow.note(f"worker {name}: gates {before[name]['spec']['schedulingGates']} -> "
                  f"{after['spec'].get('schedulingGates') or []}; {names.ENV_BACKEND} <- "
                  f"{wiring[names.ENV_BACKEND]} = {seen[names.ENV_BACKEND]!r}, FLUXION_PROVIDER"
                  f" = {seen['FLUXION_PROVIDER']!r}, FLUXION_DEVICE_ARN = "
                  f"{seen['FLUXION_DEVICE_ARN']!r} (scout's: "
                  f"{annotations[names.BACKEND_ANNOTATION]!r})")
    assert result.workers_finished and (runtime / names.RELEASE_MARKER_FILE).exists()
    # The workers finished: the scheduler gives their allocation back and clears the record.
    wait_for(
        lambda: (
            names.JOBIDS_ANNOTATION
            not in (kube.get("podgroups", "vqe", ns)["metadata"].get("annotations") or {})
        ),
        "the workers' record cleared",
    )
    flow.note("workers' allocation released, PodGroup vqe record cleared")
    assert flow.pod(scout_name)["metadata"]["annotations"][names.SCOUT_STATUS_ANNOTATION] == "ready"
    with capsys.disabled():
        print("\nhybrid flow e2e:\n  " + "\n  ".join(flow.log))


def test_reports_with_another_pods_token_or_another_audience_are_refused(
    flow: Flow, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(b) Tokens the real API server issued (TokenRequest), checked by a real TokenReview:
    only the scout's own, for Fluence's audience, is heard."""
    # Nothing is scheduled here: admission control (which weighs the free cores of the whole
    # shared API server, other tests' pods included) has no say in this test.
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    flow.node("n0")
    flow.start_webhook()
    submit_job(flow)
    pods = by_index(flow)
    scout, worker = flow.pod(pods[0]), flow.pod(pods[1])
    ca = container_env(scout, names.SIDECAR_CONTAINER)["FLUENCE_REPORT_CA"]
    audience = flow.settings.hybrid.report_audience
    release = {"status": "ready", "jobId": "forged-task"}
    caplog.set_level(logging.WARNING, logger=names.LOGGER_NAME)
    cases = [
        ("a worker's token (bound to the worker pod), Fluence's audience",
         issue_token(flow, worker, audience), 403, "is not the scout of a shared group"),
        ("the scout's token for another audience (the API server's)",
         issue_token(flow, scout, "https://kubernetes.default.svc"), 401,
         f"not valid for audience {audience!r}"),
        ("the scout's ServiceAccount, Fluence's audience, bound to no pod",
         issue_token(flow, scout, audience, bound=False), 403, "not a ServiceAccount token bound"),
        ("no token a server issued", "forged.jwt.token", 401, f"audience {audience!r}"),
    ]
    for what, token, status, words in cases:
        with pytest.raises(ReportError) as refused:
            reporter_for(flow, token, ca).report(names.REPORT_RELEASE, release)
        assert f"({status})" in str(refused.value) and words in str(refused.value), what
        flow.note(f"{what}: {refused.value}")
    logged = [r.getMessage() for r in caplog.records if "scout report refused" in r.getMessage()]
    assert len(logged) == len(cases)
    flow.log += [f"webhook log: {line}" for line in logged]
    for name in pods.values():  # nothing changed: the workers wait behind their gate
        pod = flow.pod(name)
        notes = pod["metadata"].get("annotations") or {}
        assert names.SCOUT_JOB_ID_ANNOTATION not in notes, name
        if name != pods[0]:
            assert pod["spec"]["schedulingGates"] == [{"name": names.QUANTUM_GATE}], name
    # The scout's own token for Fluence's audience is heard (the control case).
    reply = reporter_for(flow, issue_token(flow, scout, audience), ca).report(
        names.REPORT_FOUND, {"jobId": "task-7", "position": 3})
    assert reply == {"ok": True}
    noted = flow.pod(pods[0])["metadata"]["annotations"]
    assert noted[names.SCOUT_QUEUE_POSITION_ANNOTATION] == "3"
    flow.note(f"the scout's own token, audience {audience!r}: {reply}")
    with capsys.disabled():
        print("\nscout report refusals e2e:\n  " + "\n  ".join(flow.log))


QPU_CLAIM = "vqe-qpu"


def _install_qpu_driver(flow: Flow) -> QpuDriver:
    """The shipped DeviceClasses (cluster-wide, kept if there) and the driver publishing the
    flow's resources file, the one the scheduler's graph is built from."""
    for document in yaml.safe_load_all((REPO / "deploy" / "qpu-driver.yaml").read_text()):
        if document and document.get("kind") == "DeviceClass":
            try:
                flow.kube.create(DEVICE_CLASSES, document)
            except Conflict:
                pass
    driver = QpuDriver(SlicePublisher(flow.kube), flow.work / "resources.yaml", 1.0)
    published = driver.step()
    assert published is not None and published.published == {"cluster": 1}
    return driver


def _remove_qpu_slices(flow: Flow) -> None:
    """The driver's slices are cluster-wide: another test's scheduler must not see them."""
    for piece in flow.kube.list(RESOURCE_SLICES).items:
        if (piece.get("spec") or {}).get("driver") == names.QPU_DRA_DRIVER:
            flow.kube.delete(RESOURCE_SLICES, piece["metadata"]["name"])


def test_the_hybrid_flow_with_the_qpu_asked_for_by_claim(
        flow: Flow, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The same Job asking for its QPU through a ResourceClaim of the QPU driver's class: the
    API server's webhook call splits it, Fluence allocates the claim with the scout while
    the workers wait holding nothing, the sidecar reads its backend from the claim's CDI
    device (as the kubelet plugin prepares it), and the released workers read the backend
    the scout's claim holds."""
    kube = flow.kube
    try:
        (priority_class,) = read_objects(REPO / "deploy" / "fluence.yaml", kind="PriorityClass")
        kube.create("priorityclasses", priority_class)
    except Conflict:
        pass
    for suffix in ("n0", "n1", "n2"):
        flow.node(suffix)
    _install_qpu_driver(flow)
    try:
        _claim_flow(flow, monkeypatch)
    finally:
        _remove_qpu_slices(flow)
    with capsys.disabled():
        print("\nhybrid flow with a QPU claim e2e:\n  " + "\n  ".join(flow.log))


def _claim_flow(flow: Flow, monkeypatch: pytest.MonkeyPatch) -> None:
    kube, ns = flow.kube, flow.ns
    fake = f'device.attributes["{names.RESOURCE_DOMAIN}"].provider == "fake"'
    kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(QPU_CLAIM, [make_device_request(
        "qpu", names.QPU_DEVICE_CLASS, 1, fake)], namespace=None), ns)
    flow.start_webhook()
    submit_job(flow, claim={"name": "qpu", "resourceClaimName": QPU_CLAIM})

    # -- the split, as stored ----------------------------------------------------------------
    pods = by_index(flow)
    scout_name, worker_names = pods[0], [pods[i] for i in (1, 2, 3)]
    scout = flow.pod(scout_name)
    assert scout["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_SCOUT
    assert scout["spec"]["resourceClaims"] == [{"name": "qpu", "resourceClaimName": QPU_CLAIM}]
    sidecar = next(c for c in scout["spec"]["containers"] if c["name"] == names.SIDECAR_CONTAINER)
    assert sidecar["resources"]["claims"] == [{"name": "qpu"}]
    for name in worker_names:
        worker = flow.pod(name)
        assert worker["spec"]["schedulingGates"] == [{"name": names.QUANTUM_GATE}]
        assert not worker["spec"].get("resourceClaims")
        assert not worker["spec"]["containers"][0]["resources"].get("claims")
    flow.settled()
    groups = {g["metadata"]["name"]: g["spec"]["schedulingPolicy"]["gang"]["minCount"]
              for g in kube.list("podgroups", ns).items
              if not g["metadata"].get("deletionTimestamp")}
    assert groups == {"vqe-scout": 1, "vqe": 3}
    flow.note(f"webhook split: scout {scout_name} keeps claim {QPU_CLAIM} (sidecar uses it); "
              f"workers {', '.join(worker_names)} gated, no claim")

    # -- Fluence allocates the claim with the scout; the workers hold nothing ----------------
    flow.start_scheduler()
    scout = wait_for(lambda: (p := flow.pod(scout_name))["spec"].get("nodeName") and p,
                     "the scout bound")
    claim = kube.get(RESOURCE_CLAIMS, QPU_CLAIM, ns) or {}
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == names.QPU_DRA_DRIVER
    assert [r["name"] for r in claim["status"]["reservedFor"]] == [scout_name]
    flow.note(f"scheduler bound scout -> {scout['spec']['nodeName']}, claim {QPU_CLAIM} "
              f"allocated {result['pool']}/{result['device']}, reserved for the scout")
    time.sleep(2)  # every chance to (wrongly) touch the workers
    for name in worker_names:
        assert flow.pod(name)["spec"].get("nodeName") is None

    # -- the sidecar: its env as injected, plus the claim's CDI device -----------------------
    env = container_env(scout, names.SIDECAR_CONTAINER)
    assert names.ENV_BACKEND not in env
    cdi = flow.work / "cdi"
    answer = Preparer(kube, flow.work / "resources.yaml", cdi).prepare(dra_pb2.Claim(
        namespace=ns, name=QPU_CLAIM, uid=claim["metadata"]["uid"]))
    assert answer.error == ""
    spec = json.loads((cdi / f"fluence-qpu-{claim['metadata']['uid']}.json").read_text())
    env.update(line.split("=", 1) for line in spec["devices"][0]["containerEdits"]["env"])
    assert env[names.ENV_BACKEND] == "sim_qpu" and env["FLUXION_PROVIDER"] == "fake"
    token_file = flow.work / "projected-token"
    token_file.write_text(issue_token(flow, scout, flow.settings.hybrid.report_audience))
    env[names.ENV_REPORT_TOKEN_FILE] = str(token_file)
    env["FLUENCE_REPORT_URL"] = flow.report_url()
    runtime = flow.work / "emptydir"
    runtime.mkdir()
    env[names.ENV_RUNTIME_DIR] = str(runtime)
    sidecar_settings = sidecar_settings_from(monkeypatch, env)
    clock = VirtualClock()
    fake_queue = FakeQueueProvider(clock, {scout["metadata"]["uid"]: FakeTask(
        "fake-task/0001", SCRIPT, session="session-42")})
    real = collect_providers(get_plugin_manager(sidecar_settings))
    runner = sidecar_from_env(sidecar_settings, HttpsReporter.from_settings(sidecar_settings),
                              [*real, fake_queue], clock=clock)
    gated_at: dict[float, bool] = {}
    finished: set[str] = set()

    def on_sleep(now: float) -> None:
        workers = [flow.pod(n) for n in worker_names]
        gated_at[now] = all(w["spec"].get("schedulingGates") for w in workers)
        if gated_at[now]:
            assert not any(w["spec"].get("nodeName") for w in workers)
            return
        if not finished:
            wait_for(lambda: all(flow.pod(n)["spec"].get("nodeName") for n in worker_names),
                     "the three workers bound", timeout=30)
            flow.note(f"t={now:g}s (virtual) workers bound: " + ", ".join(
                f"{n}->{flow.pod(n)['spec']['nodeName']}" for n in worker_names))
            for name in worker_names:
                kube.patch_status("pods", name, {"status": {"phase": "Succeeded"}}, ns)
                finished.add(name)

    clock.on_sleep = on_sleep
    outcome = runner.run()
    assert outcome.outcome is Outcome.READY and sorted(outcome.ungated) == sorted(worker_names)
    assert gated_at[70] is True and gated_at[80] is False

    # -- each worker read the backend the scout's claim holds --------------------------------
    for name in worker_names:
        after = flow.pod(name)
        assert_released_worker(after)
        seen = container_env(after, "app")
        flow.note(f"worker {name}: {names.ENV_BACKEND}={seen[names.ENV_BACKEND]!r}, "
                  f"FLUXION_DEVICE_ARN={seen['FLUXION_DEVICE_ARN']!r} (from the scout's claim)")
