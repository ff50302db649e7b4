"""``fluence webhook``'s wiring: the scouts trust the CA it serves with, and it takes reports."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from webhook_helpers import admit, container, shared

from fluence_core import hookimpl, names
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import load_settings
from fluence_core.webhook.transport import tls
from fluence_core.webhook.main import make_server


def serve(tmp_path: Path, **overrides: object):  # type: ignore[no-untyped-def]
    """``fluence webhook`` with a mounted certificate, its plugins as installed, and no
    admission control (the in-memory cluster has no nodes to admit a group onto)."""
    cert = tls.generate(["localhost"], tmp_path / "tls", ip_addresses=["127.0.0.1"])
    settings = load_settings(webhook_cert_dir=tmp_path / "tls", **overrides)
    cluster = FakeCluster()
    cluster.create("jobs", {"metadata": {"name": "qj", "namespace": "default"},
                            "spec": {"parallelism": 4, "completions": 4,
                                     "template": {"spec": {"containers": []}}}}, "default")
    server = make_server(settings, cluster, host="127.0.0.1", port=0, report_port=0)
    return server, cert


def test_scouts_are_told_to_trust_the_ca_the_webhook_serves_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    server, cert = serve(tmp_path)
    try:
        _, scout = admit(server.service, shared("qj-0", 0))
        env = {e["name"]: e.get("value") for e in container(scout, names.SIDECAR_CONTAINER)["env"]}
        assert env["FLUENCE_REPORT_CA"] == cert.ca_pem.decode()
        assert env["FLUENCE_REPORT_URL"] == (
            f"https://fluence-webhook.fluence-system.svc:8444{names.REPORT_PATH}")
    finally:
        server.server_close()


def test_a_report_ca_the_operator_set_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    server, _ = serve(tmp_path, report_ca="OPERATOR CA", report_url="https://fluence.example/r")
    try:
        _, scout = admit(server.service, shared("qj-0", 0))
        env = {e["name"]: e.get("value") for e in container(scout, names.SIDECAR_CONTAINER)["env"]}
        assert (env["FLUENCE_REPORT_CA"], env["FLUENCE_REPORT_URL"]) == (
            "OPERATOR CA", "https://fluence.example/r")
    finally:
        server.server_close()


def test_the_podgroup_repair_runs_as_one_of_the_servers_loops_unless_its_interval_is_0(
    tmp_path: Path,
) -> None:
    from fluence_core.webhook.controller.repair import PodGroupRepair

    server, _ = serve(tmp_path)
    try:
        (repair,) = [loop for loop in server.loops if isinstance(loop, PodGroupRepair)]
        assert repair.writer is server.service.writer and repair.interval == 60
    finally:
        server.server_close()
    server, _ = serve(tmp_path, webhook_repair_interval=0)
    try:
        assert not [loop for loop in server.loops if isinstance(loop, PodGroupRepair)]
    finally:
        server.server_close()


def _deployed_configuration() -> dict:  # type: ignore[type-arg]
    import yaml

    path = Path(__file__).resolve().parents[2] / "deploy" / "webhook.yaml"
    (config,) = [doc for doc in yaml.safe_load_all(path.read_text())
                 if doc and doc["kind"] == "MutatingWebhookConfiguration"]
    return config  # type: ignore[no-any-return]


def test_at_start_the_pod_webhook_gets_the_conditions_its_handlers_declare(
    tmp_path: Path,
) -> None:
    from fluence_core.kube.api import MUTATING_WEBHOOKS
    from fluence_core.webhook.cel import NEEDS_CONDITION
    from fluence_core.webhook.controller.publish import publish_match_conditions

    tls.generate(["localhost"], tmp_path / "tls", ip_addresses=["127.0.0.1"])
    settings = load_settings(webhook_cert_dir=tmp_path / "tls")
    cluster = FakeCluster()
    deployed = _deployed_configuration()
    cluster.create(MUTATING_WEBHOOKS, deployed)
    server = make_server(settings, cluster, host="127.0.0.1", port=0, report_port=0)
    try:
        stored = cluster.get(MUTATING_WEBHOOKS, settings.webhook.config)
        by_name = {w["name"]: w for w in stored["webhooks"]}
        pods_webhook = by_name[f"pods.{names.DOMAIN}"]
        assert pods_webhook["matchConditions"] == server.service.match_conditions
        assert [c["name"] for c in pods_webhook["matchConditions"]][-1] == NEEDS_CONDITION
        for other in deployed["webhooks"][1:]:  # the Job and workload webhooks keep theirs
            assert by_name[other["name"]]["matchConditions"] == other["matchConditions"]
        # published already: a second start changes nothing
        assert publish_match_conditions(cluster, settings.webhook.config,
                                        server.service.match_conditions) == 0
    finally:
        server.server_close()


def _post(port: int, ca: bytes, path: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    import http.client
    import json
    import ssl

    connection = http.client.HTTPSConnection(
        "localhost", port, timeout=10, context=ssl.create_default_context(cadata=ca.decode()))
    try:
        connection.request("POST", path, body=b'{"event": "found"}',
                           headers={"Authorization": "Bearer x"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@contextmanager
def _serving(server):  # type: ignore[no-untyped-def]
    """Serve ``server`` on a thread for the ``with`` block, then shut it down and close it."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def test_scout_reports_are_served_on_their_own_port_and_admission_on_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    server, cert = serve(tmp_path)
    with _serving(server):
        assert server.port != server.report_port
        status, answer = _post(server.report_port, cert.ca_pem, names.REPORT_PATH)
        assert (status, answer["code"]) == (401, 401)  # the report route: no valid token
        status, answer = _post(server.port, cert.ca_pem, names.REPORT_PATH)
        assert answer["kind"] == "AdmissionReview"  # the admission port knows no reports
        status, answer = _post(server.report_port, cert.ca_pem, "/mutate")
        assert (status, answer["code"]) == (404, 404)  # nor the report port reviews


def test_disabling_the_quantum_plugin_stops_the_report_route_and_the_orphan_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fluence_core.hybrid.orphans import OrphanSweep

    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    server, _ = serve(tmp_path)
    try:
        assert [type(loop) for loop in server.loops].count(OrphanSweep) == 1
        assert list(server.routes.by_path) == [names.REPORT_PATH]
    finally:
        server.server_close()
    server, cert = serve(tmp_path, disable_plugins=["webhook-quantum"])
    with _serving(server):
        assert not [loop for loop in server.loops if isinstance(loop, OrphanSweep)]
        status, answer = _post(server.report_port, cert.ca_pem, names.REPORT_PATH)
        assert (status, answer["code"]) == (404, 404)


def test_handlers_without_quantum_leave_out_its_report_route_and_orphan_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fluence_core.hybrid.orphans import OrphanSweep

    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    server, cert = serve(tmp_path, webhook_handlers=["gang", "job-group", "fluxion-env"])
    with _serving(server):
        assert "quantum" not in [h.name for h in server.service.handlers]
        assert not [loop for loop in server.loops if isinstance(loop, OrphanSweep)]
        assert not server.routes.by_path
        status, answer = _post(server.report_port, cert.ca_pem, names.REPORT_PATH)
        assert (status, answer["code"]) == (404, 404)


def test_handlers_naming_quantum_keep_its_report_route_and_orphan_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fluence_core.hybrid.orphans import OrphanSweep

    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    server, _ = serve(tmp_path, webhook_handlers=["quantum", "gang"])
    try:
        assert [type(loop) for loop in server.loops].count(OrphanSweep) == 1
        assert list(server.routes.by_path) == [names.REPORT_PATH]
    finally:
        server.server_close()


class _RouteOnly:
    """A plugin that offers a route and a loop but no handler."""

    path = "/v1/elsewhere"
    max_body = 1024

    def post(self, headers: object, body: bytes) -> tuple[int, dict]:  # type: ignore[type-arg]
        return 200, {}

    def start(self) -> None: ...

    def stop(self) -> None: ...

    @hookimpl
    def fluence_webhook_routes(self, settings: object, cluster: object) -> list[object]:
        return [self]

    @hookimpl
    def fluence_webhook_loops(self, settings: object, cluster: object) -> list[object]:
        return [self]


def test_a_plugin_that_offers_no_handler_keeps_its_routes_and_loops_whatever_the_handlers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fluence_core.plugins import get_plugin_manager

    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    tls.generate(["localhost"], tmp_path / "tls", ip_addresses=["127.0.0.1"])
    settings = load_settings(webhook_cert_dir=tmp_path / "tls", webhook_handlers=["gang"])
    plugin = _RouteOnly()
    manager = get_plugin_manager(settings, extra_plugins=[("route-only", plugin)])
    server = make_server(settings, FakeCluster(), host="127.0.0.1", port=0, report_port=0,
                         manager=manager)
    try:
        assert list(server.routes.by_path) == ["/v1/elsewhere"]
        assert plugin in server.loops
    finally:
        server.server_close()
