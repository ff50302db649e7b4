"""A real kube-apiserver (+ etcd, + kube-controller-manager) for tests and benchmarks.

Follows the envtest convention: ``KUBEBUILDER_ASSETS`` names a folder holding
``etcd`` and ``kube-apiserver`` (and optionally ``kube-controller-manager``).
:func:`start_apiserver` runs them on loopback ports with a throw-away CA,
serving certificate, service-account key pair and an admin bearer token, so the
end-to-end suite and the benchmark exercise :class:`~fluence_core.kube.client.KubeCluster`
against the same server Fluence meets in production, with no kubelet.

Flags that matter, and why:

* ``GenericWorkload,GangScheduling,WorkloadWithJob`` feature gates and the
  ``scheduling.k8s.io/v1alpha2`` runtime config serve PodGroups (and let the
  Job controller create them for Indexed Jobs).
* ``TopologyAwareWorkloadScheduling`` keeps a PodGroup's
  ``spec.schedulingConstraints`` (without it the API server drops the field on
  write), and turns on kube-scheduler's topology-aware placement of gangs.
* ``TaintNodesByCondition`` is disabled: with no kubelet, hand-made Nodes would
  otherwise be tainted not-ready forever.
* etcd 3.4 needs ``--experimental-watch-progress-notify-interval``, else a watch
  started right after a write fails with 504 "Too large resource version".
* The controller manager runs without ``node-lifecycle-controller``, which
  would evict every pod from nodes whose kubelet never reports.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from fluence_core import names
from fluence_core.kube.api import MUTATING_WEBHOOKS, ClusterAPI, Resource
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError, Conflict
from fluence_core.log import logger
from fluence_core.plugins import get_plugin_manager
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import Settings
from fluence_core.webhook import BackgroundWriter, build_service
from fluence_core.webhook.transport import tls
from fluence_core.webhook.cel import scheduler_condition
from fluence_core.webhook.controller.informer import watched_for
from fluence_core.webhook.controller.publish import publish_match_conditions
from fluence_core.webhook.main import Webhook
from fluence_core.hybrid.endpoint import ReportEndpoint
from fluence_core.webhook.admission.review import AdmissionEndpoint, AdmissionService
from fluence_core.webhook.transport.routes import Routes
from fluence_core.webhook.transport.server import Loop, WebhookServer, server_context
from fluence_core.kube.meta import annotations_of

ASSETS_ENV: Final = "KUBEBUILDER_ASSETS"
FEATURE_GATES: Final = ("GenericWorkload=true,GangScheduling=true,WorkloadWithJob=true,"
                         "TopologyAwareWorkloadScheduling=true,WorkloadAwarePreemption=true")
RUNTIME_CONFIG: Final = "scheduling.k8s.io/v1alpha2=true"
ADMIN_TOKEN: Final = "fluence-e2e-admin-token"
SERVICE_CIDR: Final = "10.0.0.0/24"


class HarnessError(RuntimeError):
    """A binary failed to start or never became ready; the message carries its log tail."""


DEFAULT_ASSETS = Path("/usr/local/kubebuilder/bin")
"""Where envtest looks when ``KUBEBUILDER_ASSETS`` is unset."""


def find_assets(environ: Mapping[str, str] = os.environ,
                default: Path = DEFAULT_ASSETS) -> tuple[Path | None, str]:
    """The assets folder, or None and the reason it cannot be used.

    As envtest does: ``KUBEBUILDER_ASSETS`` when set, else :data:`DEFAULT_ASSETS`.
    """
    raw = environ.get(ASSETS_ENV)
    if not raw:
        if (default / "kube-apiserver").exists():
            raw = str(default)
        else:
            return None, (f"{ASSETS_ENV} not set and nothing in {default}: point it at a "
                          "folder holding etcd and kube-apiserver (1.36, for "
                          "scheduling.k8s.io/v1alpha2)")
    folder = Path(raw)
    missing = [b for b in ("etcd", "kube-apiserver") if not os.access(folder / b, os.X_OK)]
    if missing:
        return None, f"{ASSETS_ENV}={raw} lacks executable {', '.join(missing)}"
    return folder, ""


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60,
             every: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy, and return that.

    An e2e test waits on controllers and watches it does not drive; a bound
    instead of a sleep keeps the test fast when the cluster is quick and names
    ``what`` it waited for when it is not.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def find_kubectl(environ: Mapping[str, str] = os.environ) -> Path | None:
    """kubectl beside the API server binaries (as envtest ships it), else on PATH."""
    assets, _ = find_assets(environ)
    if assets is not None and os.access(assets / "kubectl", os.X_OK):
        return assets / "kubectl"
    found = shutil.which("kubectl")
    return Path(found) if found else None


def ensure_namespace(cluster: ClusterAPI, name: str) -> str:
    """Namespace ``name`` with its ``default`` ServiceAccount, made if missing.

    Without the controller manager nothing creates that ServiceAccount, and the
    ServiceAccount admission plugin then refuses every pod in the namespace.
    """
    for resource, body, namespace in (("namespaces", {"metadata": {"name": name}}, None),
                                      ("serviceaccounts", {"metadata": {"name": "default"}}, name)):
        try:
            cluster.create(resource, body, namespace)
        except Conflict:
            pass  # there already, or the controller manager was quicker
    return name


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Pki:
    """The files a throw-away control plane needs."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    tokens: Path


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def make_pki(folder: Path, token: str = ADMIN_TOKEN) -> Pki:
    """A CA, a serving certificate for loopback and the in-cluster names, an SA key pair, a token
    file."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fluence-e2e-ca")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = _key()
    names: list[x509.GeneralName] = [
        x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default",
                                  "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
    ]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "10.0.0.1")]
    serving_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name).public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = _key()
    pki = Pki(folder / "ca.crt", folder / "ca.key", folder / "apiserver.crt",
              folder / "apiserver.key", folder / "sa.key", folder / "sa.pub",
              folder / "tokens.csv")
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.ca_key, ca_key)
    pki.serving_cert.write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.serving_key, serving_key)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    pki.tokens.write_text(f'{token},admin,admin-uid,"system:masters"\n')
    return pki


@dataclass
class ApiServer:
    """A running control plane: where it is, how to reach it, and its processes."""

    url: str
    token: str
    ca_file: Path
    workdir: Path
    controller_manager: bool
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    etcd_url: str = ""
    """etcd's client URL (plain HTTP on localhost): a test can compact its history."""

    def cluster(self, **options: object) -> KubeCluster:
        """A :class:`KubeCluster` logged in as the admin (system:masters)."""
        return KubeCluster.from_token(self.url, self.token, ca_file=self.ca_file,
                                      **options)  # type: ignore[arg-type]

    def kubeconfig(self) -> Path:
        """A kubeconfig for the admin, for kubectl or the controller manager."""
        path = self.workdir / "admin.kubeconfig"
        path.write_text(_kubeconfig(self.url, self.ca_file, self.token))
        return path

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last lines a component wrote, for failure messages."""
        log = self.workdir / f"{name}.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate every process, newest first, killing what is still up 3 s later:
        kube-apiserver drains its open watches before it exits (measured: 57 s for one
        60-second watch, where 15 s ended every e2e session in a kill anyway), and nothing
        a throwaway control plane holds needs the drain."""
        for name, process in reversed(list(self.processes.items())):
            stop_process(process, timeout=3)
            logger.debug("%s stopped (exit %s)", name, process.returncode)
        self.processes.clear()


def stop_process(process: subprocess.Popen[Any], timeout: float = 30.0) -> int:
    """Terminate ``process`` (when it still runs), kill it if it is not gone ``timeout``
    seconds later, and return its exit code: a test never leaves a child behind."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def _kubeconfig(url: str, ca_file: Path, token: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: e2e\n  cluster:\n    server: {url}\n"
        f"    certificate-authority: {ca_file}\n"
        f"users:\n- name: admin\n  user:\n    token: {token}\n"
        "contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: admin\n"
        "current-context: e2e\n"
    )


def _spawn(server: ApiServer, name: str, argv: list[str]) -> None:
    log: IO[bytes] = open(server.workdir / f"{name}.log", "wb")  # noqa: SIM115 - owned by the child
    server.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL)
    log.close()


def _wait_ready(server: ApiServer, name: str, path: str, deadline: float) -> None:
    context = ssl.create_default_context(cafile=str(server.ca_file))
    request = urllib.request.Request(server.url + path,
                                     headers={"Authorization": f"Bearer {server.token}"})
    last = ""
    while time.monotonic() < deadline:
        process = server.processes[name]
        if process.poll() is not None:
            raise HarnessError(f"{name} exited with {process.returncode}:\n"
                               f"{server.log_tail(name)}")
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError) as error:
            last = str(error)
        time.sleep(0.2)
    raise HarnessError(f"{name} not ready at {path} in time ({last}):\n{server.log_tail(name)}")


def _wait_port(server: ApiServer, name: str, port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.processes[name].poll() is not None:
            raise HarnessError(f"{name} exited:\n{server.log_tail(name)}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise HarnessError(f"{name} never listened on {port}:\n{server.log_tail(name)}")


KUBE_SCHEDULER_ENV: Final = "KUBE_SCHEDULER"


def find_kube_scheduler(assets: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """kube-scheduler from ``KUBE_SCHEDULER``, else beside the API server; None if neither."""
    for candidate in (environ.get(KUBE_SCHEDULER_ENV), str(assets / "kube-scheduler")):
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def start_kube_scheduler(server: ApiServer, binary: Path, timeout: float = 60.0) -> None:
    """Run kube-scheduler (default profile) against ``server`` until the server stops.

    It places the pods whose ``schedulerName`` is ``default-scheduler``, as the
    peer Fluence is compared with.
    """
    port = free_port()
    _spawn(server, "kube-scheduler", [
        str(binary), f"--kubeconfig={server.kubeconfig()}", "--leader-elect=false",
        "--bind-address=127.0.0.1", f"--secure-port={port}",
        f"--feature-gates={FEATURE_GATES}",
    ])
    _wait_port(server, "kube-scheduler", port, time.monotonic() + timeout)


@contextmanager
def start_apiserver(assets: Path, workdir: Path, *, controller_manager: bool | None = None,
                    timeout: float = 90.0,
                    apiserver_flags: Sequence[str] = (),
                    controller_manager_flags: Sequence[str] = (),
                    etcd_flags: Sequence[str] = ()) -> Iterator[ApiServer]:
    """Run etcd, kube-apiserver (and the controller manager when present) until the block exits.

    ``controller_manager`` None means "if the binary is in ``assets``". ``apiserver_flags``
    are added to kube-apiserver's own (a benchmark's audit log, say),
    ``controller_manager_flags`` to the controller manager's (its client limits, say), and
    ``etcd_flags`` to etcd's (a larger backend quota for a benchmark of many nodes).
    """
    if controller_manager is None:
        controller_manager = os.access(assets / "kube-controller-manager", os.X_OK)
    pki = make_pki(workdir / "pki")
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = ApiServer(f"https://127.0.0.1:{api_port}", ADMIN_TOKEN, pki.ca_cert, workdir,
                       controller_manager, etcd_url=f"http://127.0.0.1:{etcd_port}")
    deadline = time.monotonic() + timeout
    try:
        etcd = [
            str(assets / "etcd"), "--name=e2e", f"--data-dir={workdir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
            "--experimental-watch-progress-notify-interval=1s",
            *etcd_flags,
        ]
        _spawn(server, "etcd", etcd)
        _wait_port(server, "etcd", etcd_port, deadline)
        apiserver = [
            str(assets / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}", f"--cert-dir={workdir / 'certs'}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={pki.tokens}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            f"--feature-gates={FEATURE_GATES}", f"--runtime-config={RUNTIME_CONFIG}",
            "--disable-admission-plugins=TaintNodesByCondition",
            "--profiling=false",
            *apiserver_flags,
        ]
        _spawn(server, "kube-apiserver", apiserver)
        _wait_ready(server, "kube-apiserver", "/readyz", deadline)
        if controller_manager:
            kcm = [
                str(assets / "kube-controller-manager"),
                f"--kubeconfig={server.kubeconfig()}", "--leader-elect=false",
                "--controllers=*,-node-lifecycle-controller",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--feature-gates={FEATURE_GATES}",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                f"--cert-dir={workdir / 'kcm-certs'}",
                *controller_manager_flags,
            ]
            _spawn(server, "kube-controller-manager", kcm)
        logger.info("test API server ready at %s (controller manager: %s)",
                    server.url, controller_manager)
        yield server
    finally:
        server.stop()


def compact_etcd(server: ApiServer) -> int:
    """Compact etcd's history up to its current revision (returned): a watch resumed from an
    older resourceVersion then gets 410 Gone, as on a busy cluster whose history moved on."""
    def post(path: str, body: Mapping[str, Any]) -> Any:
        request = urllib.request.Request(server.etcd_url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")

    revision = int(post("/v3/kv/range", {"key": "AA=="})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


# -- the webhook beside the API server -------------------------------------------------------

WEBHOOK_RULES: Final[Mapping[str, tuple[str, str]]] = {"pods": ("", "v1"), "jobs": ("batch", "v1")}
"""The resources the webhook can be registered for, with their API group and version."""


def webhook_name(resource: str) -> str:
    """The name of the webhook for ``resource`` (the API server's refusals quote it)."""
    return f"{resource}.{names.DOMAIN}"


def webhook_entry(resource: str, url: str, namespace: str, *,
                  reinvocation: Literal["Never", "IfNeeded"] = "IfNeeded",
                  ca_pem: bytes | None = None,
                  match_conditions: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """One webhook of a MutatingWebhookConfiguration: CREATE of ``resource`` in ``namespace``
    only, sent to ``url``, failing closed and without side effects on dry run (as deployed)."""
    if resource not in WEBHOOK_RULES:
        raise ValueError(f"webhook resource {resource!r}: one of {sorted(WEBHOOK_RULES)}")
    group, version = WEBHOOK_RULES[resource]
    client: dict[str, str] = {"url": url}
    if ca_pem is not None:
        client["caBundle"] = base64.b64encode(ca_pem).decode()
    entry: dict[str, Any] = {
        "name": webhook_name(resource), "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "rules": [{"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE"],
                   "resources": [resource]}],
        "namespaceSelector": {"matchLabels": {names.NAMESPACE_NAME_LABEL: namespace}},
        "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
        "reinvocationPolicy": reinvocation}
    if match_conditions:
        entry["matchConditions"] = [dict(c) for c in match_conditions]
    return entry


def served(kube: ClusterAPI, resource: Resource, namespace: str) -> bool:
    """Whether the API server serves ``resource`` (a JobSet without its CRD: no); an
    informer of a kind it does not serve never syncs, and is not waited for."""
    try:
        kube.list(resource, namespace if resource.namespaced else None)
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


PROBE_POD: Final = "fluence-webhook-probe"
"""The pod :func:`wait_in_force` sends on dry run: never stored, though a test recording the
pods its webhook was sent sees it."""


def wait_in_force(kube: KubeCluster, namespace: str, webhook: str,
                  timeout: float = 30.0) -> None:
    """Return once the API server calls pod webhook ``webhook`` for a Fluence pod of
    ``namespace``.

    The API server learns of a new or changed MutatingWebhookConfiguration from its own
    informer, a moment after the write; a pod created before then is admitted without the
    webhook. The probe is a Fluence pod carrying a key only Fluence writes, created on dry
    run (admission in full, nothing stored, no watch event), until the answer shows the
    webhook was called: the key stripped (``owned.removing_scheduler_only``), or a refusal
    naming the webhook.
    Any other answer (the key kept, an admission policy refusing it) means not yet.
    """
    key = names.ALLOCATION_ANNOTATION
    probe = {"metadata": {"name": PROBE_POD, "annotations": {key: "{}"}},
             "spec": {"schedulerName": names.SCHEDULER_NAME, "containers": [
                 {"name": "probe", "image": "busybox",
                  "resources": {"requests": {"cpu": "1m"}}}]}}
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = kube.create("pods", probe, namespace, dry_run=True)
            if key not in annotations_of(answer):
                return
            last = f"the probe pod was admitted still carrying {key}"
        except ApiError as refused:
            if f'admission webhook "{webhook}"' in refused.message:
                return
            last = f"the probe pod was refused: {refused.message}"
        if time.monotonic() > deadline:
            raise HarnessError(f"webhook {webhook} not called in {timeout:g} s ({last})")
        time.sleep(0.1)


@contextmanager
def webhook_beside(kube: KubeCluster, settings: Settings, workdir: Path, *, namespace: str,
                   resources: Sequence[str] = ("pods",),
                   reinvocation: Literal["Never", "IfNeeded"] = "IfNeeded",
                   service: AdmissionService | None = None,
                   loops: Sequence[Loop] = (),
                   match_conditions: bool = False) -> Iterator[Webhook]:
    """Fluence's webhook on 127.0.0.1, registered with the API server ``kube`` talks to.

    The four steps every webhook e2e test needs: a serving certificate from a
    fresh CA (in ``workdir``), the HTTPS server in a thread, a
    MutatingWebhookConfiguration named ``settings.webhook.config`` with one
    webhook per entry of ``resources`` (``pods``, ``jobs``) for CREATE in
    ``namespace``, created with the CA already in it (created without, a create
    racing the CA patch fails "x509: certificate signed by unknown authority")
    and then patched by :func:`tls.patch_ca_bundle`, the path the deployed
    webhook takes. ``service`` defaults to the built-in
    handlers and plugins for ``settings`` over ``kube``, with a background
    writer for PodGroups as ``fluence webhook`` has; the scouts' report endpoint
    (``/v1/scout-report``) is served too, on a port of its own (the yielded
    :class:`~fluence_core.webhook.main.Webhook`'s ``report_port``), and scouts are given
    this CA to trust. On
    exit the configuration is deleted first (no request then reaches a closed port),
    then the server stops and the writer finishes. ``loops`` (the orphan sweep) run while
    the server serves, as in ``fluence webhook``, and so do the default service's informers
    (:func:`~fluence_core.webhook.controller.informer.watched_for`, of ``namespace`` only, and the
    controller acting on what is stored there), synced before it yields. With
    ``match_conditions`` the pod webhook is registered as deploy/webhook.yaml has it
    (Fluence pods only) and then given the conditions the service's handlers declare by
    :func:`publish_match_conditions`, as ``fluence webhook`` does at start; without, every
    pod of ``namespace`` is sent. With a pod webhook it yields only once the API server calls
    it (:func:`wait_in_force`): a test's first pod is never admitted without it.
    """
    cert = tls.generate(["localhost"], workdir, ip_addresses=["127.0.0.1"])
    if settings.hybrid.report_ca is None:  # as fluence webhook does: scouts trust its serving CA
        settings = settings.replaced(report_ca=cert.ca_pem.decode())
    if service is None:
        watched = watched_for(kube, namespace)  # this webhook's namespace: tests share a server
        service = build_service(settings, get_plugin_manager(settings), kube,
                                writer=BackgroundWriter(), watched=watched)
    informers = service.controller.informers(namespace)  # what is stored there needs
    context = server_context(str(cert.cert_file), str(cert.key_file))
    routes = Routes([ReportEndpoint(kube, settings)])
    server = Webhook(service, WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(service),
                                            ssl_context=context, loops=[*informers, *loops]),
                     WebhookServer(("127.0.0.1", 0), routes, ssl_context=context), routes)
    threading.Thread(target=server.serve_forever, daemon=True, name="e2e-webhook").start()
    for each in informers:  # as fluence webhook soon after its start: lookups, not reads
        if served(kube, each.resource, namespace) and not each.wait_synced(30):
            raise HarnessError(f"the webhook's {each.resource.plural} informer never synced")
    name = settings.webhook.config
    try:
        url = f"https://127.0.0.1:{server.port}/mutate"
        kube.create(MUTATING_WEBHOOKS, {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [webhook_entry(
                r, url, namespace, reinvocation=reinvocation, ca_pem=cert.ca_pem,
                match_conditions=[scheduler_condition()] if match_conditions and r == "pods"
                else ()) for r in resources]})
        try:
            tls.patch_ca_bundle(kube, name, cert.ca_pem)
            if match_conditions:
                publish_match_conditions(kube, name, service.match_conditions)
            if "pods" in resources:
                wait_in_force(kube, namespace, webhook_name("pods"))
            yield server
        finally:
            kube.delete(MUTATING_WEBHOOKS, name)  # False if a test deleted it already
    finally:
        server.shutdown()
        server.server_close()
        if service.writer is not None:
            service.writer.close()


# -- the scheduler beside the API server -----------------------------------------------------


@dataclass
class SchedulerThread:
    """A :class:`Scheduler` running ``fluence up``'s loop in a thread (:func:`scheduler_beside`)."""

    scheduler: Scheduler
    thread: threading.Thread

    @property
    def alive(self) -> bool:
        """Whether the loop still runs: no cycle, event or bad object may end it."""
        return self.thread.is_alive()


@contextmanager
def scheduler_beside(kube: ClusterAPI, settings: Settings, *, idle: float = 0.5,
                     join_timeout: float = 90.0,
                     bind_workers: int = 0) -> Iterator[SchedulerThread]:
    """Fluence's scheduler over ``kube``, looping in a daemon thread until the block exits.

    The steps every scheduler e2e test took, written out five times before: make the
    scheduler, :meth:`~Scheduler.start` it here (list, graph, restore: a failure there
    fails the test at once, not silently in the thread), then :meth:`~Scheduler.run` on
    a thread with ``idle`` seconds between quiet cycles (``fluence up`` waits 5; a test
    wants the next cycle soon). On exit the loop is told to stop and joined; a loop still
    running ``join_timeout`` seconds later fails a block that otherwise passed.
    ``bind_workers`` above 0 binds from threads, as ``fluence up`` does; ``kube`` may be
    the in-memory cluster too.
    """
    scheduler = Scheduler(kube, settings, bind_workers=bind_workers)
    scheduler.start()
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), kwargs={"idle": idle},
                              daemon=True, name="e2e-scheduler")
    thread.start()
    try:
        yield SchedulerThread(scheduler, thread)
    finally:
        stop.set()
        thread.join(join_timeout)
    if thread.is_alive():
        raise AssertionError(f"the scheduler's loop still ran {join_timeout:g} s after stop")
