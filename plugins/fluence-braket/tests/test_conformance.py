"""The Braket provider passes the provider conformance suite, the SDK over a Stubber."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping

from botocore.stub import ANY

from fluence_braket.provider import BraketProvider
from fluence_braket.testing import DEVICE_ARN, TASK_ARN, stubbed_session
from fluence_core.api import BEYOND_REPORTED, Backend
from fluence_core.testing import TaskState, provider_conformance

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
STATUS = {"queued": "QUEUED", "running": "RUNNING", "completed": "COMPLETED", "failed": "FAILED"}


class BraketDouble:
    """Braket's API as the Stubber answers it: a search lists tasks, a get reports one."""

    reports_position = True
    backend = Backend("rigetti_cepheus", {"provider": "braket", "region": "us-east-1",
                                          "arn": DEVICE_ARN, "backend": "rigetti_cepheus"})
    foreign: Mapping[str, str] = {"provider": "qrmi", "vendor": "ibm"}

    def __init__(self) -> None:
        session, self.stubber = stubbed_session()
        self.stubber.activate()
        self.provider = BraketProvider(session_factory=lambda region: session, now=lambda: NOW)

    def will_list(self, pod_uid: str, state: TaskState | None) -> None:
        tags = {"fluence-pod-uid": pod_uid if state is not None else "someone-else"}
        status = STATUS[(state or TaskState("queued")).status]
        summary = {"quantumTaskArn": TASK_ARN, "status": status,
                   "deviceArn": DEVICE_ARN, "shots": 100, "outputS3Bucket": "bucket",
                   "outputS3Directory": "tasks", "createdAt": NOW, "tags": tags}
        self.stubber.add_response("search_quantum_tasks", {"quantumTasks": [summary]},
                                  {"filters": ANY})

    def will_report(self, state: TaskState) -> None:
        position = state.position
        shown = ">2000" if position == BEYOND_REPORTED else str(position)
        response: dict[str, Any] = {
            "quantumTaskArn": TASK_ARN, "status": STATUS[state.status], "deviceArn": DEVICE_ARN,
            "deviceParameters": "{}", "shots": 100, "outputS3Bucket": "bucket",
            "outputS3Directory": "tasks", "createdAt": NOW,
            "queueInfo": {"queue": "QUANTUM_TASKS_QUEUE", "position": shown,
                          "queuePriority": "Normal"}}
        expected = {"quantumTaskArn": TASK_ARN, "additionalAttributeNames": ["QueueInfo"]}
        self.stubber.add_response("get_quantum_task", response, expected)

    def close(self) -> None:
        self.stubber.deactivate()
        self.stubber.assert_no_pending_responses()


test_provider_conformance = provider_conformance(BraketDouble)
