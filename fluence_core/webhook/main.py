"""``fluence webhook``: wire settings, plugins, cluster, TLS and the server, then serve."""

from __future__ import annotations

import signal
import threading
from typing import Any

from fluence_core import names
from fluence_core.kube.api import ClusterAPI
from fluence_core.log import logger
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import Settings
from fluence_core.webhook import BackgroundWriter, build_service, log_contract, tls
from fluence_core.webhook.cleanup import cleanup_for
from fluence_core.webhook.informer import Watched, watched_for
from fluence_core.webhook.orphans import OrphanSweep
from fluence_core.webhook.publish import publish_match_conditions
from fluence_core.webhook.repair import repair_for
from fluence_core.webhook.report import ReportEndpoint
from fluence_core.webhook.server import Loop, WebhookServer, server_context


def connect(settings: Settings) -> ClusterAPI:
    from fluence_core.kube.client import KubeCluster

    return KubeCluster.connect(qps=settings.kube_qps, burst=settings.kube_burst)


def make_server(settings: Settings, cluster: ClusterAPI | None, *, host: str = "0.0.0.0",
                port: int | None = None, manager: Any = None) -> WebhookServer:
    """Everything but the serving loop (tests call this with a fake cluster and port 0):
    the certificate and caBundle, the service, and the pod webhook's matchConditions
    built from its handlers.

    The scout's sidecar trusts the CA the webhook serves with, unless FLUENCE_REPORT_CA
    names another: the certificate comes first, so the handlers inject it.
    """
    cert = tls.bootstrap(settings, cluster)
    if settings.report_ca is None:
        settings = settings.model_copy(update={"report_ca": cert.ca_pem.decode()})
    manager = manager or get_plugin_manager(settings)
    watched = Watched() if cluster is None else watched_for(cluster)  # no reads per request
    service = build_service(settings, manager, cluster, writer=BackgroundWriter(),
                            watched=watched)
    log_contract(service)
    if cluster is not None:  # only the pods the handlers need are sent from now on
        publish_match_conditions(cluster, settings.webhook_config, service.match_conditions)
    reports = None if cluster is None else ReportEndpoint(cluster, settings)
    loops: list[Loop] = [*service.controller.informers()]  # lookups, and what is stored
    if cluster is not None:
        loops.append(OrphanSweep(cluster, settings))
    repair = repair_for(service)  # PodGroups a killed predecessor left queued
    if repair is not None:
        loops.append(repair)
    cleanup = cleanup_for(service)  # PodGroups of bare gangs that ended
    if cleanup is not None:
        loops.append(cleanup)
    server = WebhookServer((host, settings.webhook_port if port is None else port), service,
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)),
                           reports=reports, loops=loops)
    return server


def run(settings: Settings, cluster: ClusterAPI | None = None) -> None:
    """Serve until SIGTERM/SIGINT."""
    cluster = cluster or connect(settings)
    server = make_server(settings, cluster, host=settings.webhook_bind_address)
    logger.info("webhook: serving AdmissionReview on https://%s:%d (scout reports on %s)",
                settings.webhook_bind_address, server.port,
                names.REPORT_PATH if server.reports else "nothing")

    def stop(signum: int, frame: Any) -> None:
        logger.info("webhook: signal %d, shutting down", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        if server.service.writer is not None:
            server.service.writer.close()  # the PodGroups of pods already admitted
