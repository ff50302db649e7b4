"""The QRMI provider's sidecar half: the job record, job status, held sessions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fluence_core.api import Backend, BackendInfo, Provider, job_records

from fluence_qrmi.interceptor import LOCAL_API, RUNTIME_API

QUEUED, RUNNING, COMPLETED, FAILED = "QUEUED", "RUNNING", "COMPLETED", "FAILED"
_NORMAL = {
    # QRMI TaskStatus names and qiskit-ibm-runtime JobStatus names, upper-cased
    "QUEUED": QUEUED, "INITIALIZING": QUEUED, "VALIDATING": QUEUED, "PENDING": QUEUED,
    "RUNNING": RUNNING, "COMPLETED": COMPLETED, "DONE": COMPLETED,
    "FAILED": FAILED, "ERROR": FAILED, "CANCELLED": FAILED, "CANCELED": FAILED,
}
_RESOURCE_TYPES = {
    "qiskit-runtime-service": "IBMQiskitRuntimeService",
    "ibm": "IBMQiskitRuntimeService",
    "direct-access": "IBMDirectAccess",
    "pasqal": "PasqalCloud",
    "iqm": "IQMServer",
}


@dataclass
class QrmiTask:
    job_id: str
    session: str | None
    backend: str
    api: str = "qrmi"
    status: str = QUEUED


def normal_status(raw: object) -> str:
    """A vendor status (enum or text, e.g. ``TaskStatus.Running``, ``DONE``) as
    QUEUED/RUNNING/COMPLETED/FAILED."""
    text = str(getattr(raw, "name", raw)).rsplit(".", 1)[-1].upper()
    return _NORMAL.get(text, QUEUED)


def qrmi_status(task: QrmiTask, backend: Backend) -> str:
    """Ask the vendor through QRMI (credentials from the QRMI_* environment)."""
    import qrmi

    kind = backend.attributes.get("qrmi_type") or backend.attributes.get("vendor") or "ibm"
    resource_type = getattr(qrmi.ResourceType, _RESOURCE_TYPES.get(kind, "IBMQiskitRuntimeService"))
    resource = qrmi.QuantumResource(task.backend or backend.name, resource_type)
    return normal_status(resource.task_status(task.job_id))


def runtime_status(task: QrmiTask, backend: Backend) -> str:
    """Ask qiskit-ibm-runtime (credentials from the saved account or QISKIT_IBM_* environment)."""
    from qiskit_ibm_runtime import QiskitRuntimeService

    return normal_status(QiskitRuntimeService().job(task.job_id).status())


def _default_status(task: QrmiTask, backend: Backend) -> str:
    return (
        runtime_status(task, backend)
        if task.api == RUNTIME_API
        else qrmi_status(task, backend)
    )


FAKE_BACKEND_ATTRIBUTE = "fake_backend"
"""A backend whose resources entry says ``fake-backend: FakeManilaV2`` is one of
qiskit-ibm-runtime's fake backends (local testing mode): its figures need no account."""


def fake_backend(name: str) -> Any:
    """An instance of ``qiskit_ibm_runtime.fake_provider.<name>``; a bad name is named."""
    from qiskit_ibm_runtime import fake_provider

    found = getattr(fake_provider, name, None)
    if not isinstance(found, type):
        raise ValueError(f"fake-backend {name!r} is not in qiskit_ibm_runtime.fake_provider")
    return found()


def _default_info(backend: Backend) -> BackendInfo | None:
    fake = backend.attributes.get(FAKE_BACKEND_ATTRIBUTE)
    if fake:
        ibm_backend = fake_backend(fake)
        source = "qiskit-ibm-runtime local"
    else:
        from qiskit_ibm_runtime import QiskitRuntimeService

        ibm_backend = QiskitRuntimeService().backend(backend.name)
        source = "qiskit-ibm-runtime"
    status = ibm_backend.status()
    figures = {"price_per_shot": 0.0, "price_per_task": 0.0} if fake else {}
    return BackendInfo(backend.name, queue=status.pending_jobs,
                       status="online" if status.operational else "offline",
                       qubits=ibm_backend.num_qubits, source=source, **figures)


@dataclass
class QrmiProvider(Provider):
    """Serves ``provider: qrmi`` whatever the vendor. ``status_of(task, backend)`` and
    ``info_of(backend)`` are the vendor boundary (tests pass fakes)."""

    runtime_dir: Path | None = None
    status_of: Callable[[QrmiTask, Backend], str] = _default_status
    info_of: Callable[[Backend], BackendInfo | None] = _default_info
    name: str = "qrmi"
    interceptor_module: str = "fluence_qrmi.interceptor"
    interceptor_match: Mapping[str, str] = field(default_factory=lambda: {"provider": "qrmi"})
    _backend: Backend | None = None

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return attributes.get("provider") == "qrmi"

    def find_my_task(self, pod_uid: str, backend: Backend, timeout: float) -> QrmiTask | None:
        self._backend = backend
        records = job_records(pod_uid, self.runtime_dir)
        if not records:
            return None
        first = records[0]  # the scout's first job opens the session the workers join
        task = QrmiTask(first["job_id"], first.get("session"), first.get("backend") or backend.name,
                        first.get("api", "qrmi"))
        if task.api == LOCAL_API:  # ran in the app's process: its record is all there is
            task.status = normal_status(first.get("status") or RUNNING)
        return task

    def refresh(self, task: QrmiTask) -> QrmiTask:
        if task.api == LOCAL_API:
            return task
        backend = self._backend or Backend(task.backend)
        return QrmiTask(
            task.job_id, task.session, task.backend, task.api, self.status_of(task, backend)
        )

    def queue_position(self, task: QrmiTask) -> int | None:
        return None  # IBM Quantum reports no queue position: readiness is "running"

    def is_ready(self, task: QrmiTask, position: int) -> bool:
        return task.status in (RUNNING, COMPLETED)

    def task_failed(self, task: QrmiTask) -> bool:
        return task.status == FAILED

    def job_id(self, task: QrmiTask) -> str:
        return task.job_id

    def session(self, task: QrmiTask) -> str | None:
        return task.session

    def backend_info(self, backend: Backend) -> BackendInfo | None:
        return self.info_of(backend)
