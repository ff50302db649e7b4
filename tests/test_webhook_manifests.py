"""deploy/: the webhook's two ports as shipped (issue 32): admission for the API server only,
the scouts' reports and the probes on a port of their own, and a NetworkPolicy to match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fluence_core.settings import Settings

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def _documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def _one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in _documents(name) if doc["kind"] == kind]
    return found


def _webhook_container() -> dict[str, Any]:
    deployment = _one("webhook.yaml", "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def _env() -> dict[str, str]:
    return {e["name"]: e.get("value") for e in _webhook_container()["env"]}


def test_the_deployment_sets_both_ports_apart_and_as_the_settings_default_them() -> None:
    env = _env()
    defaults = Settings()
    assert int(env["FLUENCE_WEBHOOK_PORT"]) == defaults.webhook.port
    assert int(env["FLUENCE_REPORT_PORT"]) == defaults.webhook.report_port != defaults.webhook.port
    ports = {p["name"]: p["containerPort"] for p in _webhook_container()["ports"]}
    assert ports == {"https": defaults.webhook.port, "reports": defaults.webhook.report_port}


def test_the_service_sends_admission_and_reports_to_their_own_container_ports() -> None:
    service = _one("webhook.yaml", "Service")
    by_name = {p["name"]: p for p in service["spec"]["ports"]}
    assert by_name["https"]["targetPort"] == Settings().webhook.port
    assert by_name["reports"]["targetPort"] == Settings().webhook.report_port
    # The sidecar's default URL names the Service's report port.
    assert f":{by_name['reports']['port']}/" in str(Settings().hybrid.report_url)


def test_the_probes_use_the_report_port_which_never_asks_for_a_client_certificate() -> None:
    container = _webhook_container()
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == "reports"


def test_the_network_policy_opens_admission_to_an_address_range_and_reports_to_pods() -> None:
    policy = _one("optional/webhook-networkpolicy.yaml", "NetworkPolicy")
    rules = {rule["ports"][0]["port"]: rule["from"] for rule in policy["spec"]["ingress"]}
    assert set(rules) == {Settings().webhook.port, Settings().webhook.report_port}
    # Admission: only an address range (the API server's), no pod of any namespace, whatever
    # its labels (issue 32: any pod labelled role: scout reached the admission port).
    assert all(set(peer) == {"ipBlock"} for peer in rules[Settings().webhook.port])
    assert rules[Settings().webhook.report_port] == [{"namespaceSelector": {}}]
