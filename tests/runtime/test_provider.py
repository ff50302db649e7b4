"""Providers come from the ``fluence_providers`` hook and are chosen by the FLUXION_* attributes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_core import hookimpl, names
from fluence_core.errors import FluenceError
from fluence_core.plugins import get_plugin_manager
from fluence_core.runtime.fake_provider import FakeQueueProvider
from fluence_core.runtime.provider import (
    BEYOND_REPORTED,
    Provider,
    attributes_from_env,
    collect_providers,
    job_records,
    parse_queue_position,
    resolve_provider,
)
from fluence_core.hybrid.sidecar import VirtualClock
from fluence_core.settings import Settings


class ThirdParty:
    @hookimpl
    def fluence_providers(self):  # type: ignore[no-untyped-def]
        return [FakeQueueProvider(VirtualClock())]


def only(*plugins: tuple[str, object], blocked: tuple[str, ...] = ()) -> list[Provider]:
    """The providers of ``plugins`` alone (installed ones are optional: never counted on)."""
    installed = list(get_plugin_manager(Settings()).infos)
    settings = Settings(disable_plugins=installed + list(blocked))
    return collect_providers(get_plugin_manager(settings, list(plugins)))


def test_a_third_party_provider_resolves_through_the_hook() -> None:
    providers = only(("third-party", ThirdParty()))
    assert [p.name for p in providers] == ["fake"]
    assert resolve_provider({"provider": "fake"}, providers).name == "fake"


def test_every_installed_provider_resolves_by_its_own_attribute() -> None:
    for provider in collect_providers(get_plugin_manager(Settings())):
        assert provider.matches({"provider": provider.name}), provider.name


def test_a_blocked_plugin_contributes_no_provider() -> None:
    providers = only(("third-party", ThirdParty()), blocked=("third-party",))
    with pytest.raises(FluenceError, match="no provider serves provider=fake"):
        resolve_provider({"provider": "fake"}, providers)


def test_attributes_are_read_from_the_fluxion_environment() -> None:
    env = {
        "FLUXION_BACKEND": "ibm_fez",
        "FLUXION_QRMI_TYPE": "qiskit-runtime-service",
        "FLUXION_": "x",
        "PATH": "/bin",
    }
    assert attributes_from_env(env) == {"backend": "ibm_fez", "qrmi_type": "qiskit-runtime-service"}


@pytest.mark.parametrize("raw, expected", [("3", 3), (">2000", 2001), (None, None), ("None", None),
                                           (7, 7), ("", None), (">x", BEYOND_REPORTED)])
def test_queue_positions_as_vendors_report_them(raw: object, expected: int | None) -> None:
    assert parse_queue_position(raw) == expected


def test_job_records_are_the_pods_whole_lines_in_the_order_written(tmp_path: Path) -> None:
    (tmp_path / names.JOB_RECORD_FILE).write_text(
        '{"pod_uid": "scout", "job_id": "1"}\n'
        '{"pod_uid": "other", "job_id": "2"}\n'
        '7\n'  # whole JSON, but not a record
        '{"pod_uid": "scout", "job_id": "3"}\n'
        '{"pod_uid": "scout", "job_')  # the interceptor is still writing it
    assert [r["job_id"] for r in job_records("scout", tmp_path)] == ["1", "3"]
    assert job_records("nobody", tmp_path) == []


def test_no_job_record_yet_means_no_jobs(tmp_path: Path) -> None:
    assert job_records("scout", tmp_path / "not-made-yet") == []


def test_job_records_default_to_the_runtime_dir_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_RUNTIME_DIR", str(tmp_path))
    (tmp_path / names.JOB_RECORD_FILE).write_text('{"pod_uid": "scout", "job_id": "1"}\n')
    assert job_records("scout") == [{"pod_uid": "scout", "job_id": "1"}]
