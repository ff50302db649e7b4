"""The Braket provider's sidecar half and its figures for ``fluence select``.

Two paths find the scout's task. A task the local simulator ran is in the job
record the interceptor wrote (``$FLUENCE_RUNTIME_DIR/jobs.jsonl``, ``api:
braket-local``): it is finished, so the workers are released at once with its
id. Otherwise, with AWS credentials, ``SearchQuantumTasks`` finds it by tag.
Without credentials and without a local record there is nothing to find yet,
and AWS is not asked (it could only refuse).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from fluence_core.api import (
    Backend, BackendInfo, Provider, job_records, logger, names, parse_queue_position,
)

from fluence_braket.interceptor import LOCAL_API

QUEUED_STATES = frozenset({"CREATED", "QUEUED"})
READY_STATES = frozenset({"RUNNING", "COMPLETED"})
FAILED_STATES = frozenset({"FAILED", "CANCELLING", "CANCELLED"})
DEFAULT_REGION = "us-east-1"


LOCAL_SIMULATOR_ATTRIBUTE = "local_simulator"
"""A backend whose resources entry says ``local-simulator: braket_sv`` is the SDK's
``LocalSimulator`` of that name: free, never queued, and described without AWS."""


def local_simulator_info(name: str, simulator: str) -> BackendInfo:
    """The local simulator's figures: its qubits from the SDK, no price, no queue."""
    from braket.devices import LocalSimulator

    qubits = LocalSimulator(simulator).properties.paradigm.qubitCount
    return BackendInfo(name, price_per_shot=0.0, price_per_task=0.0, queue=0, status="online",
                       qubits=int(qubits), source="braket local")


@dataclass
class BraketTask:
    arn: str
    status: str = "CREATED"
    raw_position: str | None = None
    failure_reason: str | None = None
    region: str = DEFAULT_REGION
    local: bool = False
    """Run by the local simulator: finished when recorded, never asked of AWS."""


def _default_session(region: str) -> Any:
    import boto3
    from braket.aws import AwsSession

    return AwsSession(boto3.Session(region_name=region))


@dataclass
class BraketProvider(Provider):
    """Serves ``provider: braket``. ``session_factory(region)`` returns an ``AwsSession``
    (tests hand one whose client is under botocore's Stubber)."""

    session_factory: Callable[[str], Any] = _default_session
    runtime_dir: Path | None = None
    """Where the interceptor's job record is (default: ``FLUENCE_RUNTIME_DIR``)."""
    lookback: timedelta = timedelta(days=1)
    now: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))
    name: str = "braket"
    interceptor_module: str = "fluence_braket.interceptor"
    interceptor_match: Mapping[str, str] = field(default_factory=lambda: {"provider": "braket"})
    _sessions: dict[str, Any] = field(default_factory=dict)
    _credentials: dict[str, bool] = field(default_factory=dict)

    def aws_reachable(self, backend: Backend) -> bool:
        """Whether the session for this backend has credentials (boto3's chain: environment,
        files, web identity, instance role), asked once per region."""
        region = backend.attributes.get("region") or DEFAULT_REGION
        if region not in self._credentials:
            try:
                found = self.session_in(region).boto_session.get_credentials() is not None
            except Exception:
                found = False
            self._credentials[region] = found
            if not found:
                logger.info("braket: no AWS credentials for %s; only local simulator tasks "
                            "are found", region)
        return self._credentials[region]

    def session_for(self, backend: Backend) -> Any:
        return self.session_in(backend.attributes.get("region") or DEFAULT_REGION)

    def session_in(self, region: str) -> Any:
        if region not in self._sessions:
            self._sessions[region] = self.session_factory(region)
        return self._sessions[region]

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return attributes.get("provider") == "braket"

    def local_task(self, pod_uid: str, backend: Backend) -> BraketTask | None:
        """The pod's first local-simulator task in the interceptor's record, if any."""
        for entry in job_records(pod_uid, self.runtime_dir):
            if entry.get("api") == LOCAL_API:
                region = backend.attributes.get("region") or DEFAULT_REGION
                return BraketTask(str(entry["job_id"]), str(entry.get("status") or "COMPLETED"),
                                  region=region, local=True)
        return None

    def find_my_task(self, pod_uid: str, backend: Backend, timeout: float) -> BraketTask | None:
        local = self.local_task(pod_uid, backend)
        if local is not None or not self.aws_reachable(backend):
            return local
        client = self.session_for(backend).braket_client
        since = (self.now() - self.lookback).strftime("%Y-%m-%dT%H:%M:%SZ")
        filters = [{"name": "createdAt", "operator": "GTE", "values": [since]}]
        if backend.attributes.get("arn"):
            filters.append(
                {"name": "deviceArn", "operator": "EQUAL", "values": [backend.attributes["arn"]]}
            )
        best: dict[str, Any] | None = None
        token: str | None = None
        while True:
            request: dict[str, Any] = {"filters": filters}
            if token:
                request["nextToken"] = token
            page = client.search_quantum_tasks(**request)
            for summary in page.get("quantumTasks", []):
                if (summary.get("tags") or {}).get(names.TASK_TAG_KEY) != pod_uid:
                    continue
                if best is None or summary.get("createdAt", 0) > best.get("createdAt", 0):
                    best = summary
            token = page.get("nextToken")
            if not token:
                break
        if best is None:
            return None
        region = backend.attributes.get("region") or DEFAULT_REGION
        return BraketTask(best["quantumTaskArn"], best.get("status", "CREATED"), region=region)

    def refresh(self, task: BraketTask) -> BraketTask:
        if task.local:
            return task
        # AwsSession.get_quantum_task asks for QueueInfo (and retries throttling).
        response = self.session_in(task.region).get_quantum_task(task.arn)
        queue = response.get("queueInfo") or {}
        position = queue.get("position")
        return BraketTask(task.arn, response.get("status", task.status),
                          None if position in (None, "None") else str(position),
                          response.get("failureReason"), task.region)

    def queue_position(self, task: BraketTask) -> int | None:
        if task.status not in QUEUED_STATES:
            return None
        return parse_queue_position(task.raw_position)

    def is_ready(self, task: BraketTask, position: int) -> bool:
        if task.status in READY_STATES:
            return True
        current = self.queue_position(task)
        return current is not None and current <= position

    def task_failed(self, task: BraketTask) -> bool:
        return task.status in FAILED_STATES

    def job_id(self, task: BraketTask) -> str:
        return task.arn

    def describe(self, task: BraketTask) -> str:
        return f"{task.arn} {task.status} position={task.raw_position}"

    def backend_info(self, backend: Backend) -> BackendInfo | None:
        simulator = backend.attributes.get(LOCAL_SIMULATOR_ATTRIBUTE)
        if simulator:
            return local_simulator_info(backend.name, simulator)
        arn = backend.attributes.get("arn")
        if not arn or not self.aws_reachable(backend):
            return None
        device = self.session_for(backend).get_device(arn)
        capabilities = device.get("deviceCapabilities") or "{}"
        if isinstance(capabilities, str):
            capabilities = json.loads(capabilities)
        qubits = (capabilities.get("paradigm") or {}).get("qubitCount")
        cost = (capabilities.get("service") or {}).get("deviceCost") or {}
        per_shot = float(cost["price"]) if cost.get("unit") == "shot" and "price" in cost else None
        queue = None
        for entry in device.get("deviceQueueInfo") or []:
            if (
                entry.get("queue") == "QUANTUM_TASKS_QUEUE"
                and entry.get("queuePriority", "Normal") == "Normal"
            ):
                queue = parse_queue_position(entry.get("queueSize"))
        status = (
            "online"
            if device.get("deviceStatus") == "ONLINE"
            else str(device.get("deviceStatus", "")).lower()
        )
        return BackendInfo(backend.name, price_per_shot=per_shot, queue=queue, status=status,
                           qubits=qubits, source="braket")
