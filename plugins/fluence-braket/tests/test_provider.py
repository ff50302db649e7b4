"""The Braket sidecar half against the SDK's AwsSession over a Stubber."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from botocore.stub import ANY

from fluence_braket.provider import BraketProvider, BraketTask
from fluence_braket.testing import DEVICE_ARN, TASK_ARN
from fluence_core.api import BEYOND_REPORTED, Backend

BACKEND = Backend(
    "rigetti_cepheus",
    {"provider": "braket", "region": "us-east-1", "arn": DEVICE_ARN, "backend": "rigetti_cepheus"},
)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
OTHER_ARN = TASK_ARN.replace("0f1e2d3c", "99999999")


def _summary(arn: str, uid: str | None, created: datetime, status: str = "QUEUED") -> dict:
    return {"quantumTaskArn": arn, "status": status, "deviceArn": DEVICE_ARN, "shots": 100,
            "outputS3Bucket": "bucket", "outputS3Directory": "tasks", "createdAt": created,
            "tags": {"fluence-pod-uid": uid} if uid else {}}


@pytest.fixture
def provider(aws) -> BraketProvider:
    session, _ = aws
    return BraketProvider(session_factory=lambda region: session, now=lambda: NOW)


def test_provider_serves_braket_attributes_only() -> None:
    assert BraketProvider().matches({"provider": "braket"})
    assert not BraketProvider().matches({"provider": "qrmi", "vendor": "ibm"})


def test_finds_the_task_tagged_with_the_pod_uid_across_pages(aws, provider) -> None:
    _, stubber = aws
    filters = [{"name": "createdAt", "operator": "GTE", "values": ["2026-11-28T12:00:00Z"]},
               {"name": "deviceArn", "operator": "EQUAL", "values": [DEVICE_ARN]}]
    stubber.add_response(
        "search_quantum_tasks",
        {"quantumTasks": [_summary(OTHER_ARN, "someone-else", NOW)], "nextToken": "p2"},
        {"filters": filters},
    )
    stubber.add_response(
        "search_quantum_tasks",
        {"quantumTasks": [_summary(TASK_ARN, "uid-1", NOW), _summary(OTHER_ARN, None, NOW)]},
        {"filters": filters, "nextToken": "p2"},
    )
    task = provider.find_my_task("uid-1", BACKEND, timeout=5)
    assert task is not None and provider.job_id(task) == TASK_ARN


def test_not_found_is_none(aws, provider) -> None:
    _, stubber = aws
    stubber.add_response("search_quantum_tasks", {"quantumTasks": [_summary(OTHER_ARN, "x", NOW)]},
                         {"filters": ANY})
    assert provider.find_my_task("uid-1", BACKEND, timeout=5) is None


def _get(stubber, status: str, position: str | None, reason: str | None = None) -> None:  # type: ignore[no-untyped-def]
    response = {"quantumTaskArn": TASK_ARN, "status": status, "deviceArn": DEVICE_ARN,
                "deviceParameters": "{}", "shots": 100, "outputS3Bucket": "bucket",
                "outputS3Directory": "tasks", "createdAt": NOW,
                "queueInfo": {"queue": "QUANTUM_TASKS_QUEUE", "position": position or "None",
                              "queuePriority": "Normal"}}
    if reason:
        response["failureReason"] = reason
    stubber.add_response("get_quantum_task", response,
                         {"quantumTaskArn": TASK_ARN, "additionalAttributeNames": ["QueueInfo"]})


def test_queue_position_beyond_2000_is_a_number_past_it(aws, provider) -> None:
    _, stubber = aws
    _get(stubber, "QUEUED", ">2000")
    task = provider.refresh(BraketTask(TASK_ARN))
    assert provider.queue_position(task) == BEYOND_REPORTED
    assert not provider.is_ready(task, 1)


def test_ready_at_or_under_the_ungate_position(aws, provider) -> None:
    _, stubber = aws
    _get(stubber, "QUEUED", "3")
    _get(stubber, "QUEUED", "1")
    task = provider.refresh(BraketTask(TASK_ARN))
    assert provider.queue_position(task) == 3 and not provider.is_ready(task, 1)
    assert provider.is_ready(task, 3)
    task = provider.refresh(task)
    assert provider.is_ready(task, 1)


def test_running_is_ready_with_no_position(aws, provider) -> None:
    _, stubber = aws
    _get(stubber, "RUNNING", None)
    task = provider.refresh(BraketTask(TASK_ARN))
    assert provider.queue_position(task) is None
    assert provider.is_ready(task, 1) and not provider.task_failed(task)


def test_failed_task_is_reported_failed(aws, provider) -> None:
    _, stubber = aws
    _get(stubber, "FAILED", None, reason="device offline")
    task = provider.refresh(BraketTask(TASK_ARN))
    assert provider.task_failed(task) and task.failure_reason == "device offline"
    assert provider.session(task) is None


def test_backend_info_reads_status_queue_qubits_and_shot_price(aws, provider) -> None:
    _, stubber = aws
    capabilities = {"paradigm": {"qubitCount": 108},
                    "service": {"deviceCost": {"price": 0.000425, "unit": "shot"}}}
    stubber.add_response(
        "get_device",
        {
            "deviceArn": DEVICE_ARN,
            "deviceName": "Cepheus-1-108Q",
            "providerName": "Rigetti",
            "deviceType": "QPU",
            "deviceStatus": "ONLINE",
            "deviceCapabilities": json.dumps(capabilities),
            "deviceQueueInfo": [
                {"queue": "QUANTUM_TASKS_QUEUE", "queueSize": "17", "queuePriority": "Normal"},
                {"queue": "QUANTUM_TASKS_QUEUE", "queueSize": "2", "queuePriority": "Priority"},
            ],
        },
        {"deviceArn": DEVICE_ARN},
    )
    info = provider.backend_info(BACKEND)
    assert info is not None
    assert (info.status, info.queue, info.qubits, info.price_per_shot) == (
        "online",
        17,
        108,
        0.000425,
    )


def test_fluence_resolves_braket_attributes_to_this_provider() -> None:
    from fluence_core.api import Settings
    from fluence_core.testing import get_plugin_manager

    contributed = [p for providers in get_plugin_manager(Settings()).hook.fluence_providers()
                   for p in providers]
    chosen = [p for p in contributed if p.matches({"provider": "braket", "region": "us-east-1"})]
    assert [type(p) for p in chosen] == [BraketProvider]


def test_a_local_simulator_backend_reports_its_figures_without_aws() -> None:
    local = Backend("braket_local", {"provider": "braket", "local_simulator": "braket_sv"})
    info = BraketProvider().backend_info(local)
    assert info is not None
    assert (info.status, info.queue, info.cost(1000)) == ("online", 0, 0.0)
    assert info.qubits is not None and info.qubits >= 20  # the SDK's state-vector simulator


def test_without_credentials_aws_is_not_asked_and_nothing_is_found(tmp_path) -> None:
    from types import SimpleNamespace

    # a session whose credential chain found nothing, and no client to call
    bare = SimpleNamespace(boto_session=SimpleNamespace(get_credentials=lambda: None))
    provider = BraketProvider(session_factory=lambda region: bare, runtime_dir=tmp_path)
    assert provider.find_my_task("uid-1", BACKEND, timeout=5) is None
    assert provider.backend_info(BACKEND) is None


def test_a_local_simulator_task_is_found_in_the_record_and_is_ready(tmp_path, restore_sdk,
                                                                     monkeypatch) -> None:
    from braket.circuits import Circuit
    from braket.devices import LocalSimulator

    from fluence_braket import interceptor
    from fluence_core.api import names

    monkeypatch.setenv(names.ENV_RUNTIME_DIR, str(tmp_path))
    assert interceptor.install_interceptor("uid-local") is True
    task = LocalSimulator().run(Circuit().h(0).cnot(0, 1), shots=10)
    assert task.tags == {"fluence-pod-uid": "uid-local"}
    provider = BraketProvider(runtime_dir=tmp_path)
    found = provider.refresh(provider.find_my_task("uid-local", BACKEND, timeout=5))
    assert found.local and provider.job_id(found) == task.id
    assert provider.is_ready(found, 1) and not provider.task_failed(found)


def test_the_sidecar_releases_the_workers_with_a_local_task_and_no_aws(tmp_path, restore_sdk,
                                                                      monkeypatch) -> None:
    from braket.circuits import Circuit
    from braket.devices import LocalSimulator

    from fluence_braket import interceptor
    from fluence_core.api import names
    from fluence_core.testing import FakeCluster, Sidecar, SidecarConfig, VirtualClock
    from fluence_core.testing import make_split_pod
    from fluence_core.testing import SidecarOutcome as Outcome

    monkeypatch.setenv(names.ENV_RUNTIME_DIR, str(tmp_path))
    interceptor.install_interceptor("scout-uid")
    task = LocalSimulator().run(Circuit().h(0).cnot(0, 1), shots=10)
    cluster = FakeCluster()
    cluster.create("pods", make_split_pod("scout", "qaoa", names.ROLE_SCOUT))
    cluster.create("pods", make_split_pod("w", "qaoa", names.ROLE_WORKER,
                                          gates=[names.QUANTUM_GATE]))
    clock = VirtualClock()
    clock.on_sleep = lambda now: cluster.patch_status(
        "pods", "w", {"status": {"phase": "Succeeded"}}, "default")

    def no_aws(region: str) -> object:
        raise AssertionError("AWS is not asked about a local task")

    provider = BraketProvider(session_factory=no_aws, runtime_dir=tmp_path)
    config = SidecarConfig("scout", "default", "scout-uid", BACKEND, runtime_dir=tmp_path)
    result = Sidecar(cluster, provider, config, clock).run()
    assert result.outcome is Outcome.READY and result.ungated == ["w"]
    worker = cluster.get("pods", "w", "default")
    assert worker["metadata"]["annotations"][names.SCOUT_JOB_ID_ANNOTATION] == task.id
    assert not worker["spec"].get("schedulingGates")
