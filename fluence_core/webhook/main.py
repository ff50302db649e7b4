"""``fluence webhook``: wire settings, plugins, cluster, TLS and the server, then serve."""

from __future__ import annotations

import gc
import signal
import threading
from typing import Any

from fluence_core.kube.api import ClusterAPI
from fluence_core.log import logger
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import Settings
from fluence_core.webhook import BackgroundWriter, build_service, log_contract
from fluence_core.webhook.transport import tls
from fluence_core.webhook.controller.cleanup import cleanup_for
from fluence_core.webhook.controller.informer import Watched, watched_for
from fluence_core.webhook.controller.publish import publish_match_conditions
from fluence_core.webhook.controller.repair import repair_for
from fluence_core.webhook.admission.review import AdmissionEndpoint, AdmissionService
from fluence_core.webhook.transport.routes import Routes
from fluence_core.webhook.transport.server import Loop, WebhookServer, server_context


def connect(settings: Settings) -> ClusterAPI:
    from fluence_core.kube.client import KubeCluster

    return KubeCluster.connect(qps=settings.kube.qps, burst=settings.kube.burst)


class Webhook:
    """The webhook process's two HTTPS servers: admission on ``settings.webhook.port``,
    for the API server alone, and the plugins' routes (the scouts' reports) and health
    probes on ``settings.webhook.report_port``, for pods. The process's loops (informers, repair,
    cleanup, the plugins' loops such as the orphan sweep) run with the admission server."""

    def __init__(self, service: AdmissionService, admission: WebhookServer,
                 reports: WebhookServer, routes: Routes) -> None:
        self.service = service
        self.admission = admission
        self.reports = reports
        self.routes = routes

    @property
    def port(self) -> int:
        return self.admission.port

    @property
    def report_port(self) -> int:
        return self.reports.port

    @property
    def loops(self) -> tuple[Loop, ...]:
        return self.admission.loops

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve both until :meth:`shutdown` (the report server on a thread of its own)."""
        thread = threading.Thread(target=self.reports.serve_forever, args=(poll_interval,),
                                  daemon=True, name="webhook-reports")
        thread.start()
        try:
            self.admission.serve_forever(poll_interval)
        finally:
            self.reports.shutdown()
            thread.join()

    def shutdown(self) -> None:
        """Stop serving (from another thread) and wait until both servers have stopped."""
        self.admission.shutdown()
        self.reports.shutdown()

    def server_close(self) -> None:
        self.admission.server_close()
        self.reports.server_close()


def make_server(settings: Settings, cluster: ClusterAPI | None, *, host: str = "0.0.0.0",
                port: int | None = None, report_port: int | None = None,
                manager: Any = None) -> Webhook:
    """Everything but the serving loop (tests call this with a fake cluster and ports 0):
    the certificate and caBundle, the service, the pod webhook's matchConditions built
    from its handlers, and what the plugins contribute for pods (routes) and to run
    meanwhile (loops), both only with a cluster connection and only from plugins with a
    handler that runs or none at all (``FLUENCE_WEBHOOK_HANDLERS`` without ``quantum``
    leaves out its report route and orphan sweep too).

    The scout's sidecar trusts the CA the webhook serves with, unless FLUENCE_REPORT_CA
    names another: the certificate comes first, so the handlers inject it.
    """
    cert = tls.bootstrap(settings, cluster)
    if settings.hybrid.report_ca is None:
        settings = settings.replaced(report_ca=cert.ca_pem.decode())
    manager = manager or get_plugin_manager(settings)
    watched = Watched() if cluster is None else watched_for(cluster)  # no reads per request
    service = build_service(settings, manager, cluster, writer=BackgroundWriter(),
                            watched=watched)
    log_contract(service)
    if cluster is not None:  # only the pods the handlers need are sent from now on
        publish_match_conditions(cluster, settings.webhook.config, service.match_conditions)
    loops: list[Loop] = [*service.controller.informers()]  # lookups, and what is stored
    routes = Routes()
    if cluster is not None:  # the plugins' (the quantum plugin's report route and sweep),
        # but not those of a plugin whose handlers FLUENCE_WEBHOOK_HANDLERS all leaves out
        off = service.plugins_off
        routes = Routes([r for batch in manager.subset_hook_caller(
            "fluence_webhook_routes", remove_plugins=off)(settings=settings, cluster=cluster)
            or [] for r in batch or []])
        loops += [loop for batch in manager.subset_hook_caller(
            "fluence_webhook_loops", remove_plugins=off)(settings=settings, cluster=cluster)
            or [] for loop in batch or []]
    repair = repair_for(service)  # PodGroups a killed predecessor left queued
    if repair is not None:
        loops.append(repair)
    cleanup = cleanup_for(service)  # PodGroups of bare gangs that ended
    if cleanup is not None:
        loops.append(cleanup)
    client_ca = None if settings.webhook.client_ca is None else str(settings.webhook.client_ca)
    admission = WebhookServer(
        (host, settings.webhook.port if port is None else port), AdmissionEndpoint(service),
        ssl_context=server_context(str(cert.cert_file), str(cert.key_file),
                                   client_ca=client_ca),
        loops=loops)
    try:  # pods present no client certificate: never asked for one here
        reports = WebhookServer((host, settings.webhook.report_port if report_port is None
                                 else report_port), routes,
                                ssl_context=server_context(str(cert.cert_file),
                                                           str(cert.key_file)))
    except OSError:
        admission.server_close()
        raise
    return Webhook(service, admission, reports, routes)


def run(settings: Settings, cluster: ClusterAPI | None = None) -> None:
    """Serve until SIGTERM/SIGINT, then stop at once: the servers, every loop (an informer
    cancels its watch in flight), the writer's queue; and leave the interpreter's exit
    nothing to collect."""
    cluster = cluster or connect(settings)
    webhook = make_server(settings, cluster, host=settings.webhook.bind_address)
    logger.info("webhook: serving AdmissionReview on https://%s:%d; routes for pods (%s) and "
                "health on port %d", settings.webhook.bind_address, webhook.port,
                ", ".join(webhook.routes.by_path) or "none", webhook.report_port)
    if settings.webhook.client_ca is not None:
        logger.info("webhook: admission serves only clients with a certificate signed by a CA "
                    "of %s", settings.webhook.client_ca)

    def stop(signum: int, frame: Any) -> None:
        logger.info("webhook: signal %d, shutting down", signum)
        threading.Thread(target=webhook.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        webhook.serve_forever(poll_interval=0.5)
    finally:
        webhook.server_close()
        if webhook.service.writer is not None:
            webhook.service.writer.close()  # the PodGroups of pods already admitted
        # Nothing is left to run. The interpreter's exit would still collect garbage over
        # every object the process made, which on a busy node delays the exit the kubelet
        # waits for: frozen, the survivors are freed without being scanned.
        gc.freeze()
