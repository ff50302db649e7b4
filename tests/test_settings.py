"""fluence_core.settings: every FLUENCE_* variable, its default and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from fluence_core.errors import SettingsError
from fluence_core.settings import (
    MatchPolicy,
    PluginSettings,
    Settings,
    SettingsVariables,
    load_settings,
    COMPONENTS,
    setting_rows,
)

pytestmark = pytest.mark.usefixtures("clean_env")


def test_fluence_resources_defaults_to_absent_meaning_classical_only() -> None:
    assert load_settings().graph.resources is None


def test_fluence_match_policy_defaults_to_first() -> None:
    assert load_settings().graph.match_policy is MatchPolicy.FIRST


def test_fluence_worker_timeout_defaults_to_0_meaning_forever() -> None:
    assert load_settings().sidecar.worker_timeout == 0


def test_fluence_session_hold_timeout_defaults_to_0_meaning_forever() -> None:
    assert load_settings().hybrid.session_hold_timeout == 0


def test_fluence_disable_plugins_defaults_to_none_disabled() -> None:
    assert load_settings().disable_plugins == ()


def test_other_defaults() -> None:
    settings = load_settings()
    assert settings.graph.memory_chunks_per_core == 1
    assert (settings.kube.qps, settings.kube.burst) == (50.0, 100)  # kube-scheduler's
    assert settings.log_level == "INFO"


@pytest.mark.parametrize(
    ("variable", "text", "field", "value"),
    [
        (
            "FLUENCE_RESOURCES",
            "/etc/fluence/resources.yaml",
            "resources",
            Path("/etc/fluence/resources.yaml"),
        ),
        ("FLUENCE_MATCH_POLICY", "lonode", "match_policy", MatchPolicy.LONODE),
        ("FLUENCE_WORKER_TIMEOUT", "30", "worker_timeout", 30.0),
        ("FLUENCE_SESSION_HOLD_TIMEOUT", "2.5", "session_hold_timeout", 2.5),
        ("FLUENCE_MEMORY_CHUNKS_PER_CORE", "4", "memory_chunks_per_core", 4),
        ("FLUENCE_LOG_LEVEL", "DEBUG", "log_level", "DEBUG"),
    ],
)
def test_each_variable_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str, field: str, value: object
) -> None:
    monkeypatch.setenv(variable, text)
    assert getattr(load_settings().variables, field) == value


@pytest.mark.parametrize("policy", ["first", "low", "high", "lonode", "hinode"])
def test_every_fluxion_match_policy_is_accepted(
    monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    monkeypatch.setenv("FLUENCE_MATCH_POLICY", policy)
    assert load_settings().graph.match_policy.value == policy


def test_disable_plugins_is_a_comma_separated_list_ignoring_blanks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLUENCE_DISABLE_PLUGINS", "fluxion, braket,,")
    assert load_settings().disable_plugins == ("fluxion", "braket")


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_RESOURCES", "")
    monkeypatch.setenv("FLUENCE_MATCH_POLICY", "")
    settings = load_settings()
    assert settings.graph.resources is None
    assert settings.graph.match_policy is MatchPolicy.FIRST


def test_overrides_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_WORKER_TIMEOUT", "4")
    assert load_settings(worker_timeout=2).sidecar.worker_timeout == 2


@pytest.mark.parametrize(
    ("variable", "text"),
    [
        ("FLUENCE_MATCH_POLICY", "best"),
        ("FLUENCE_BIND_WORKERS", "lots"),
        ("FLUENCE_BIND_WORKERS", "-1"),
        ("FLUENCE_WORKER_TIMEOUT", "soon"),
        ("FLUENCE_WORKER_TIMEOUT", "-5"),
        ("FLUENCE_SESSION_HOLD_TIMEOUT", "-1"),
        ("FLUENCE_MEMORY_CHUNKS_PER_CORE", "0"),
        ("FLUENCE_KUBE_QPS", "0"),
        ("FLUENCE_KUBE_BURST", "0"),
    ],
)
def test_a_bad_value_is_a_settings_error_naming_the_variable_and_value(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str
) -> None:
    monkeypatch.setenv(variable, text)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert f"{variable}={text!r}" in str(caught.value)


def test_a_settings_error_lists_every_bad_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_MATCH_POLICY", "best")
    monkeypatch.setenv("FLUENCE_WORKER_TIMEOUT", "soon")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "FLUENCE_MATCH_POLICY" in str(caught.value)
    assert "FLUENCE_WORKER_TIMEOUT" in str(caught.value)


def test_unknown_fluence_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_NOT_A_SETTING", "x")
    assert isinstance(load_settings(), Settings)


def test_enum_settings_are_read_case_insensitively(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from fluence_core.settings import MatchPolicy, load_settings

    monkeypatch.setenv("FLUENCE_MATCH_POLICY", "HiNode")
    settings = load_settings()
    assert settings.graph.match_policy is MatchPolicy.HINODE


# -- a plugin's own settings ----------------------------------------------------


class WidgetSettings(PluginSettings):
    """A plugin's settings as a third party writes them."""

    model_config = SettingsConfigDict(env_prefix="FLUENCE_WIDGET_")

    size: int = Field(default=3, ge=1, description="How big.")
    colour: str = Field(default="red", validation_alias=AliasChoices("FLUENCE_WIDGET_COLOUR",
                                                                     "FLUENCE_COLOUR"),
                        description="Which colour.")


def test_a_plugins_settings_are_read_under_its_own_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_WIDGET_SIZE", "7")
    monkeypatch.setenv("FLUENCE_SIZE", "9")  # not its prefix: ignored
    assert WidgetSettings.load().size == 7


def test_a_renamed_variable_is_still_read_by_its_old_name_and_the_new_one_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLUENCE_COLOUR", "blue")
    assert WidgetSettings.load().colour == "blue"
    monkeypatch.setenv("FLUENCE_WIDGET_COLOUR", "green")
    assert WidgetSettings.load().colour == "green"


def test_a_plugins_bad_value_is_a_settings_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLUENCE_WIDGET_SIZE", "0")
    with pytest.raises(SettingsError, match="FLUENCE_WIDGET_SIZE='0'"):
        WidgetSettings.load()


def test_overrides_are_given_by_field_name() -> None:
    assert WidgetSettings.load(size=5, colour="teal").colour == "teal"


def test_setting_rows_name_each_variable_its_default_and_its_old_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLUENCE_WIDGET_SIZE", "4")
    rows = {row.variable: row for row in setting_rows(WidgetSettings.load())}
    assert set(rows) == {"FLUENCE_WIDGET_SIZE", "FLUENCE_WIDGET_COLOUR"}
    assert (rows["FLUENCE_WIDGET_SIZE"].value, rows["FLUENCE_WIDGET_SIZE"].default) == (4, 3)
    assert rows["FLUENCE_WIDGET_COLOUR"].meaning == "Which colour. (also read from FLUENCE_COLOUR)"


def test_setting_rows_cover_every_core_setting() -> None:
    variables = [row.variable for row in setting_rows(load_settings())]
    assert variables == [f"FLUENCE_{name.upper()}" for name in SettingsVariables.model_fields]


def test_every_core_setting_says_which_components_read_it() -> None:
    for row in setting_rows(load_settings()):
        assert row.read_by, f"{row.variable} names no reader"
        assert set(row.read_by) <= set(COMPONENTS), row



def test_a_bad_value_under_an_old_name_is_named_as_the_user_wrote_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Counted(PluginSettings):
        model_config = SettingsConfigDict(env_prefix="FLUENCE_COUNTED_")
        count: int = Field(default=1, validation_alias=AliasChoices("FLUENCE_COUNTED_COUNT",
                                                                    "FLUENCE_COUNT"))

    monkeypatch.setenv("FLUENCE_COUNT", "many")
    with pytest.raises(SettingsError, match=r"invalid settings \(Counted\): FLUENCE_COUNT='many'"):
        Counted.load()


@pytest.mark.parametrize(("qps", "workers", "pool"), [
    (50.0, None, 10), (5000.0, None, 32), (10.0, None, 8), (5000.0, 4, 4), (50.0, 0, 0),
])
def test_the_bind_pool_is_sized_from_the_client_limit_unless_set(
    qps: float, workers: int | None, pool: int,
) -> None:
    assert Settings(kube_qps=qps, bind_workers=workers).scheduling.bind_pool == pool


def test_the_report_url_must_be_https_and_defaults_to_the_webhooks_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings(webhook_service="hook", webhook_namespace="ops")
    assert settings.hybrid.report_url == "https://hook.ops.svc:8444/v1/scout-report"
    monkeypatch.setenv("FLUENCE_REPORT_URL", "http://hook.ops.svc/v1/scout-report")
    with pytest.raises(SettingsError, match="FLUENCE_REPORT_URL=.*https://"):
        load_settings()


def test_the_webhook_and_metrics_listen_where_their_bind_address_says() -> None:
    from fluence_core.settings import load_settings

    chosen = load_settings(webhook_bind_address=" 127.0.0.1", metrics_bind_address="::")
    assert (chosen.webhook.bind_address, chosen.metrics.bind_address) == ("127.0.0.1", "::")
    assert load_settings().webhook.bind_address == "0.0.0.0"


# -- the grouping --------------------------------------------------------------------

DERIVED = {("scheduling", "bind_pool"), ("hybrid", "sidecar_env"), ("hybrid", "scout_env")}
"""Group fields computed from variables rather than read from one."""


def test_every_variable_has_one_place_and_every_group_field_one_variable() -> None:
    from dataclasses import fields

    from fluence_core.settings import PLACES

    assert set(PLACES) == set(SettingsVariables.model_fields)
    places = list(PLACES.values())
    assert len(places) == len(set(places)), "two variables share a place"
    settings = load_settings()
    top = {f.name for f in fields(Settings)} - {"variables"}
    groups = {name for name in top if name not in {n for g, n in places if not g}}
    declared = {(group, f.name) for group in groups
                for f in fields(getattr(settings, group))} - DERIVED
    assert declared == {place for place in places if place[0]}
    assert {n for g, n in places if not g} == top - groups


@pytest.mark.parametrize(("variable", "text", "group", "name", "value"), [
    ("FLUENCE_WEBHOOK_PORT", "9443", "webhook", "port", 9443),
    ("FLUENCE_REPORT_PORT", "9444", "webhook", "report_port", 9444),
    ("FLUENCE_KUBE_QPS", "7.5", "kube", "qps", 7.5),
    ("FLUENCE_SIDECAR_POLL_INTERVAL", "2.5", "sidecar", "poll_interval", 2.5),
    ("FLUENCE_LEADER_ELECT", "false", "leader", "elect", False),
    ("FLUENCE_METRICS_PORT", "0", "metrics", "port", 0),
    ("FLUENCE_QUANTUM_GATE", "example.org/wait", "hybrid", "quantum_gate", "example.org/wait"),
    ("FLUENCE_POD_UID", "u-1", "pod", "uid", "u-1"),
    ("FLUENCE_WATCH_CHUNK", "5", "scheduling", "watch_chunk", 5.0),
    ("FLUENCE_TOPOLOGY_LEVELS", "zone,rack", "graph", "topology_levels", ("zone", "rack")),
    ("FLUENCE_WEBHOOK_HANDLERS", "gang,quantum", "webhook", "handlers", ("gang", "quantum")),
])
def test_a_variable_is_read_into_its_features_group(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str, group: str, name: str,
    value: object,
) -> None:
    monkeypatch.setenv(variable, text)
    assert getattr(getattr(load_settings(), group), name) == value


def test_the_settings_and_their_groups_cannot_be_changed_in_place() -> None:
    from dataclasses import FrozenInstanceError

    settings = load_settings()
    with pytest.raises(FrozenInstanceError):
        settings.webhook.port = 1  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        settings.log_level = "DEBUG"  # type: ignore[misc]


def test_replaced_checks_the_new_values_and_names_the_variable() -> None:
    settings = load_settings()
    assert settings.replaced(webhook_port=9443).webhook.port == 9443
    assert settings.webhook.port == 8443  # the original is untouched
    with pytest.raises(SettingsError, match="FLUENCE_WEBHOOK_PORT=0"):
        settings.replaced(webhook_port=0)
    with pytest.raises(SettingsError, match="no such Fluence setting: webhook_prot"):
        settings.replaced(webhook_prot=9443)


def test_a_bad_keyword_to_settings_is_a_settings_error_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="FLUENCE_KUBE_QPS"):
        Settings(kube_qps=0)


def test_the_hybrid_group_gives_the_scouts_env_and_refuses_another_component() -> None:
    settings = load_settings(sidecar_poll_interval=2.5)
    sidecar = {e["name"]: e["value"] for e in settings.hybrid.pod_env("sidecar")}
    assert sidecar["FLUENCE_SIDECAR_POLL_INTERVAL"] == "2.5"
    with pytest.raises(ValueError, match="'scheduler' does not run in the scout's pod"):
        settings.hybrid.pod_env("scheduler")
