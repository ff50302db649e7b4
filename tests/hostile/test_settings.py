"""Hostile FLUENCE_* settings: each is refused with an error naming the variable.

Also through the ``fluence`` command itself: a bad setting exits with a message,
never a traceback.
"""

from __future__ import annotations

import pytest

from fluence_core import log
from fluence_core.errors import SettingsError
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import SettingsVariables, load_settings
from tests.hostile.cases import Case, cases, run_fluence

pytestmark = pytest.mark.usefixtures("clean_env")

CASES = [
    Case(
        "log-level-loud", {"FLUENCE_LOG_LEVEL": "LOUD"}, "FLUENCE_LOG_LEVEL='LOUD'.*expected one of"
    ),
    Case("log-level-number", {"FLUENCE_LOG_LEVEL": "10"}, "FLUENCE_LOG_LEVEL='10'"),
    Case("log-level-trace", {"FLUENCE_LOG_LEVEL": "trace"}, "FLUENCE_LOG_LEVEL='trace'"),
    Case("match-policy", {"FLUENCE_MATCH_POLICY": "fastest"}, "FLUENCE_MATCH_POLICY='fastest'"),
    Case("admission", {"FLUENCE_ADMISSION_CONTROL": "maybe"}, "FLUENCE_ADMISSION_CONTROL='maybe'"),
    Case("admission-old-name", {"FLUENCE_ADMISSION": "yes"}, "FLUENCE_ADMISSION='yes'"),
    Case(
        "admission-reserve-nan",
        {"FLUENCE_ADMISSION_RESERVE_CORES": "nan"},
        "FLUENCE_ADMISSION_RESERVE_CORES='nan'",
    ),
    Case("flux-broker-port", {"FLUENCE_FLUX_BROKER_PORT": "99999"}, "FLUENCE_FLUX_BROKER_PORT"),
    Case(
        "flux-start-timeout-zero",
        {"FLUENCE_FLUX_START_TIMEOUT": "0"},
        "FLUENCE_FLUX_START_TIMEOUT='0'",
    ),
    Case("webhook-bind-name", {"FLUENCE_WEBHOOK_BIND_ADDRESS": "localhost"},
         "FLUENCE_WEBHOOK_BIND_ADDRESS='localhost'"),
    Case("report-port-is-admissions", {"FLUENCE_REPORT_PORT": "8443"},
         "FLUENCE_REPORT_PORT='8443'.*port of their own"),
    Case("metrics-bind-cidr", {"FLUENCE_METRICS_BIND_ADDRESS": "10.0.0.0/8"},
         "FLUENCE_METRICS_BIND_ADDRESS='10.0.0.0/8'"),
    Case("capacity-zero", {"FLUENCE_RESOURCE_CAPACITY": "0"}, "FLUENCE_RESOURCE_CAPACITY='0'"),
    Case(
        "capacity-text", {"FLUENCE_RESOURCE_CAPACITY": "lots"}, "FLUENCE_RESOURCE_CAPACITY='lots'"
    ),
    Case(
        "capacity-arabic-digit",
        {"FLUENCE_RESOURCE_CAPACITY": "\u0663"},
        "FLUENCE_RESOURCE_CAPACITY=",
    ),
    Case("reserve-negative", {"FLUENCE_RESERVE_CORES": "-1"}, "FLUENCE_RESERVE_CORES='-1'"),
    Case(
        "reserve-float",
        {"FLUENCE_ADMISSION_RESERVE_CORES": "1.5"},
        "FLUENCE_ADMISSION_RESERVE_CORES='1.5'",
    ),
    Case("worker-timeout-negative", {"FLUENCE_WORKER_TIMEOUT": "-5"}, "FLUENCE_WORKER_TIMEOUT"),
    Case("worker-timeout-nan", {"FLUENCE_WORKER_TIMEOUT": "nan"}, "FLUENCE_WORKER_TIMEOUT='nan'"),
    Case(
        "session-hold-inf",
        {"FLUENCE_SESSION_HOLD_TIMEOUT": "inf"},
        "FLUENCE_SESSION_HOLD_TIMEOUT='inf'.*finite",
    ),
    Case("kube-qps-zero", {"FLUENCE_KUBE_QPS": "0"}, "FLUENCE_KUBE_QPS='0'"),
    Case("kube-qps-nan", {"FLUENCE_KUBE_QPS": "nan"}, "FLUENCE_KUBE_QPS='nan'.*finite"),
    Case("kube-qps-inf", {"FLUENCE_KUBE_QPS": "inf"}, "FLUENCE_KUBE_QPS='inf'"),
    Case("kube-burst-zero", {"FLUENCE_KUBE_BURST": "0"}, "FLUENCE_KUBE_BURST='0'"),
    Case(
        "memory-chunks-zero",
        {"FLUENCE_MEMORY_CHUNKS_PER_CORE": "0"},
        "FLUENCE_MEMORY_CHUNKS_PER_CORE='0'",
    ),
    Case("bind-workers-huge", {"FLUENCE_BIND_WORKERS": "100000"}, "FLUENCE_BIND_WORKERS='100000'"),
    Case("metrics-port-too-big", {"FLUENCE_METRICS_PORT": "70000"}, "FLUENCE_METRICS_PORT='70000'"),
    Case("metrics-port-negative", {"FLUENCE_METRICS_PORT": "-1"}, "FLUENCE_METRICS_PORT='-1'"),
    Case("webhook-port-zero", {"FLUENCE_WEBHOOK_PORT": "0"}, "FLUENCE_WEBHOOK_PORT='0'"),
    Case("webhook-port-text", {"FLUENCE_WEBHOOK_PORT": "https"}, "FLUENCE_WEBHOOK_PORT='https'"),
    Case(
        "leader-elect-text", {"FLUENCE_LEADER_ELECT": "perhaps"}, "FLUENCE_LEADER_ELECT='perhaps'"
    ),
    Case("observe-only-text", {"FLUENCE_OBSERVE_ONLY": "sure"}, "FLUENCE_OBSERVE_ONLY='sure'"),
    Case("lease-duration-zero", {"FLUENCE_LEASE_DURATION": "0"}, "FLUENCE_LEASE_DURATION='0'"),
    Case(
        "lease-name-upper",
        {"FLUENCE_LEASE_NAME": "Fluence"},
        "FLUENCE_LEASE_NAME='Fluence'.*Kubernetes name",
    ),
    Case(
        "lease-namespace-path",
        {"FLUENCE_LEASE_NAMESPACE": "../kube-system"},
        "FLUENCE_LEASE_NAMESPACE='../kube-system'",
    ),
    Case(
        "webhook-service-underscore",
        {"FLUENCE_WEBHOOK_SERVICE": "my_svc"},
        "FLUENCE_WEBHOOK_SERVICE='my_svc'",
    ),
    Case(
        "webhook-namespace-long",
        {"FLUENCE_WEBHOOK_NAMESPACE": "n" * 64},
        "FLUENCE_WEBHOOK_NAMESPACE=",
    ),
    Case("webhook-config-dot", {"FLUENCE_WEBHOOK_CONFIG": "a.b"}, "FLUENCE_WEBHOOK_CONFIG='a.b'"),
    Case(
        "sidecar-poll-zero",
        {"FLUENCE_SIDECAR_POLL_INTERVAL": "0"},
        "FLUENCE_SIDECAR_POLL_INTERVAL='0'",
    ),
    Case(
        "ungate-position-negative",
        {"FLUENCE_UNGATE_POSITION": "-1"},
        "FLUENCE_UNGATE_POSITION='-1'",
    ),
]


@pytest.mark.parametrize("case", cases(CASES))
def test_a_hostile_setting_is_refused_naming_the_variable(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable, value in case.input.items():
        monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=case.expect):
        load_every_settings_class()


def load_every_settings_class() -> None:
    """The core's settings, then every plugin's (as ``fluence settings`` reads them)."""
    settings = load_settings()
    for batch in get_plugin_manager(settings).hook.fluence_settings():
        for cls in batch or []:
            cls.load()


_CORE_VARIABLES = {f"FLUENCE_{field.upper()}" for field in SettingsVariables.model_fields}
CORE = [c for c in CASES if next(iter(c.input)) in _CORE_VARIABLES]


@pytest.mark.parametrize("case", cases(CORE[:8]))
def test_the_command_reports_a_hostile_setting_without_a_traceback(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable, value in case.input.items():
        monkeypatch.setenv(variable, value)
    code, output, _ = run_fluence("graph", "--nodes", "/nonexistent.yaml")
    assert code == 2
    assert "Traceback" not in output
    assert next(iter(case.input)) in output


def test_log_configure_refuses_a_level_it_does_not_know_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="'LOUD' \\(FLUENCE_LOG_LEVEL\\): expected one of"):
        log.configure("loud")
