"""The QRMI provider: job records from qiskit-ibm-runtime local mode, held sessions, status at the
boundary."""

from __future__ import annotations

import json

import pytest

from fluence_core.api import Backend, BackendInfo, names
from fluence_core.testing import FakeCluster, Sidecar, SidecarConfig, VirtualClock, make_split_pod
from fluence_core.testing import SidecarOutcome as Outcome
from fluence_qrmi import interceptor
from fluence_qrmi.provider import COMPLETED, FAILED, QUEUED, RUNNING, QrmiProvider, normal_status

BACKEND = Backend("ibm_torino", {"provider": "qrmi", "vendor": "ibm", "backend": "ibm_torino"})


def bell():  # type: ignore[no-untyped-def]
    from qiskit import QuantumCircuit

    circuit = QuantumCircuit(2)
    circuit.h(0)
    circuit.cx(0, 1)
    circuit.measure_all()
    return circuit


def run_in_local_session(shots: int = 64) -> str:
    """qiskit-ibm-runtime local mode on a fake backend: a real primitive, no network."""
    from qiskit.transpiler.preset_passmanagers import generate_preset_pass_manager
    from qiskit_ibm_runtime import SamplerV2, Session
    from qiskit_ibm_runtime.fake_provider import FakeManilaV2

    backend = FakeManilaV2()
    circuit = generate_preset_pass_manager(backend=backend, optimization_level=1).run(bell())
    with Session(backend=backend) as session:
        job = SamplerV2(mode=session).run([circuit], shots=shots)
        job.result()
    return job.job_id()


def _never_asked(task: object, backend: object) -> str:
    raise AssertionError("a local job's status is its record; no service is asked")


def test_provider_serves_qrmi_whatever_the_vendor() -> None:
    provider = QrmiProvider()
    assert provider.matches({"provider": "qrmi", "vendor": "pasqal"})
    assert provider.matches({"provider": "qrmi", "vendor": "ibm"})
    assert not provider.matches({"provider": "braket"})


def test_local_mode_job_is_recorded_and_found_by_the_sidecar_half(
    tmp_path, monkeypatch, restore_sdk
) -> None:
    monkeypatch.setenv(names.ENV_RUNTIME_DIR, str(tmp_path))
    assert interceptor.install_interceptor("scout-uid") is True
    job_id = run_in_local_session()
    entries = [
        json.loads(line) for line in (tmp_path / names.JOB_RECORD_FILE).read_text().splitlines()
    ]
    assert entries[0]["job_id"] == job_id and entries[0]["pod_uid"] == "scout-uid"
    assert entries[0]["backend"] == "fake_manila"
    assert entries[0]["api"] == "qiskit-ibm-runtime-local"  # local testing mode, no account
    provider = QrmiProvider(runtime_dir=tmp_path, status_of=_never_asked)
    task = provider.refresh(provider.find_my_task("scout-uid", BACKEND, 5))
    assert task is not None and task.job_id == job_id
    assert provider.is_ready(task, 1)  # it ran in the app's process at once
    assert QrmiProvider(runtime_dir=tmp_path).find_my_task("other-uid", BACKEND, 5) is None


def test_scout_session_close_waits_for_the_release_marker(
    tmp_path, monkeypatch, restore_sdk, capsys
) -> None:
    monkeypatch.setenv(names.ENV_RUNTIME_DIR, str(tmp_path))
    monkeypatch.setenv(names.ENV_ROLE, names.ROLE_SCOUT)
    slept = []

    def sleep(seconds: float) -> None:  # virtual: the sidecar releases after three polls
        slept.append(seconds)
        if len(slept) == 3:
            (tmp_path / names.RELEASE_MARKER_FILE).write_text("ready\n")

    monkeypatch.setattr(interceptor, "_sleep", sleep)
    interceptor.install_interceptor("scout-uid")
    run_in_local_session()
    assert len(slept) == 3
    assert "[fluence] holding the session for the workers until" in capsys.readouterr().err


def test_session_hold_times_out(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(names.ENV_RUNTIME_DIR, str(tmp_path))
    monkeypatch.setenv(names.ENV_ROLE, names.ROLE_SCOUT)
    monkeypatch.setenv(names.ENV_SESSION_HOLD_TIMEOUT, "5")
    now = [0.0]
    monkeypatch.setattr(interceptor, "_clock", lambda: now[0])
    monkeypatch.setattr(interceptor, "_sleep", lambda s: now.__setitem__(0, now[0] + s))
    assert interceptor.wait_for_release() is False and now[0] == 5


def test_workers_never_wait(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(names.ENV_ROLE, names.ROLE_WORKER)
    monkeypatch.setattr(interceptor, "_sleep", lambda s: pytest.fail("a worker slept"))
    assert interceptor.wait_for_release() is True


def test_statuses_of_both_apis_are_normalised() -> None:
    import qrmi

    assert normal_status(qrmi.TaskStatus.Running) == RUNNING
    assert normal_status(qrmi.TaskStatus.Queued) == QUEUED
    assert normal_status(qrmi.TaskStatus.Failed) == FAILED
    assert normal_status("DONE") == COMPLETED and normal_status("ERROR") == FAILED


def test_sidecar_ungates_with_the_session_when_the_job_runs(tmp_path) -> None:
    (tmp_path / names.JOB_RECORD_FILE).write_text(json.dumps(
        {"pod_uid": "scout-uid", "job_id": "d1ab", "session": "sess-99", "backend": "ibm_torino",
         "api": "qrmi"}) + "\n")
    clock = VirtualClock()
    statuses = {0: QUEUED, 10: QUEUED, 20: RUNNING}
    provider = QrmiProvider(runtime_dir=tmp_path,
                            status_of=lambda task, backend: statuses.get(clock.now(), RUNNING))
    cluster = FakeCluster()
    cluster.create("pods", make_split_pod("scout", "bell", names.ROLE_SCOUT))
    cluster.create("pods", make_split_pod("w", "bell", names.ROLE_WORKER,
                                          gates=[names.QUANTUM_GATE]))
    clock.on_sleep = lambda now: (
        cluster.patch_status("pods", "w", {"status": {"phase": "Succeeded"}}, "default")
        if now >= 30
        else None
    )
    config = SidecarConfig("scout", "default", "scout-uid", BACKEND, runtime_dir=tmp_path)
    result = Sidecar(cluster, provider, config, clock).run()
    assert result.outcome is Outcome.READY and result.ungated == ["w"]
    pod = cluster.get("pods", "w", "default")
    assert pod["metadata"]["annotations"][names.SCOUT_SESSION_ANNOTATION] == "sess-99"
    assert pod["metadata"]["annotations"][names.SCOUT_JOB_ID_ANNOTATION] == "d1ab"
    assert (tmp_path / names.RELEASE_MARKER_FILE).exists()


def test_backend_info_comes_from_the_vendor_boundary() -> None:
    provider = QrmiProvider(
        info_of=lambda b: BackendInfo(b.name, queue=4, status="online", qubits=133)
    )
    info = provider.backend_info(BACKEND)
    assert info is not None and (info.queue, info.qubits) == (4, 133)


def test_a_fake_backend_reports_its_figures_without_an_account() -> None:
    fake = Backend("manila", {"provider": "qrmi", "fake_backend": "FakeManilaV2"})
    info = QrmiProvider().backend_info(fake)
    assert info is not None
    assert (info.qubits, info.queue, info.status, info.cost(1000)) == (5, 0, "online", 0.0)
    with pytest.raises(ValueError, match="fake-backend 'FakeNowhere' is not in"):
        QrmiProvider().backend_info(Backend("x", {"fake_backend": "FakeNowhere"}))


def test_without_the_sdks_the_interceptor_returns_false(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "qiskit_ibm_runtime.base_primitive", None)
    monkeypatch.setitem(sys.modules, "qrmi.primitives", None)
    assert interceptor.install_interceptor("u") is False


def test_fluence_resolves_any_qrmi_vendor_to_this_provider() -> None:
    from fluence_core.api import Settings
    from fluence_core.testing import get_plugin_manager

    contributed = [p for providers in get_plugin_manager(Settings()).hook.fluence_providers()
                   for p in providers]
    chosen = [p for p in contributed if p.matches({"provider": "qrmi", "vendor": "pasqal"})]
    assert [type(p) for p in chosen] == [QrmiProvider]
