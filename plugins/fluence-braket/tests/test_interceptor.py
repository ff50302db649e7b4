"""The interceptor tags every task the SDK creates, and fails soft without the SDK."""

from __future__ import annotations

import sys

from botocore.stub import ANY

from fluence_braket import interceptor
from fluence_braket.provider import BraketProvider

from fluence_braket.testing import DEVICE_ARN, TASK_ARN


def _create_task(session) -> str:  # type: ignore[no-untyped-def]
    from braket.aws import AwsQuantumTask
    from braket.circuits import Circuit

    task = AwsQuantumTask.create(session, DEVICE_ARN, Circuit().h(0).cnot(0, 1),
                                 ("amzn-braket-bucket", "tasks"), shots=100)
    return task.id


def test_created_task_carries_the_pod_uid_tag(aws, restore_sdk) -> None:
    session, stubber = aws
    stubber.add_response("create_quantum_task", {"quantumTaskArn": TASK_ARN},
                         {"deviceArn": DEVICE_ARN, "shots": 100,
                          "outputS3Bucket": "amzn-braket-bucket", "outputS3KeyPrefix": "tasks",
                          "action": ANY, "deviceParameters": ANY,
                          "tags": {"fluence-pod-uid": "uid-123"}})
    assert BraketProvider().install_interceptor("uid-123") is True
    assert _create_task(session) == TASK_ARN


def test_user_tags_are_kept_beside_ours(aws, restore_sdk) -> None:
    session, stubber = aws
    stubber.add_response("create_quantum_task", {"quantumTaskArn": TASK_ARN},
                         {"clientToken": ANY, "deviceArn": DEVICE_ARN, "shots": 10,
                          "outputS3Bucket": "bucket", "outputS3KeyPrefix": "k", "action": ANY,
                          "tags": {"team": "qaoa", "fluence-pod-uid": "uid-9"}})
    interceptor.install_interceptor("uid-9")
    assert session.create_quantum_task(clientToken="t", deviceArn=DEVICE_ARN, shots=10,
                                       outputS3Bucket="bucket", outputS3KeyPrefix="k", action="{}",
                                       tags={"team": "qaoa"}) == TASK_ARN


def test_installing_twice_wraps_once_and_uses_the_newest_uid(aws, restore_sdk) -> None:
    from braket.aws.aws_session import AwsSession

    session, stubber = aws
    interceptor.install_interceptor("first")
    wrapped = AwsSession.create_quantum_task
    interceptor.install_interceptor("second")
    assert AwsSession.create_quantum_task is wrapped
    stubber.add_response("create_quantum_task", {"quantumTaskArn": TASK_ARN},
                         {"clientToken": "t", "deviceArn": DEVICE_ARN, "shots": 1,
                          "outputS3Bucket": "bucket", "outputS3KeyPrefix": "k", "action": "{}",
                          "tags": {"fluence-pod-uid": "second"}})
    session.create_quantum_task(clientToken="t", deviceArn=DEVICE_ARN, shots=1,
                                outputS3Bucket="bucket", outputS3KeyPrefix="k", action="{}")


def test_without_the_sdk_it_returns_false_and_does_not_raise(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "braket.aws.aws_session", None)  # imports now fail
    monkeypatch.setitem(sys.modules, "braket.devices", None)
    assert interceptor.install_interceptor("uid") is False
    assert BraketProvider().install_interceptor("uid") is False
