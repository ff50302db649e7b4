"""The QRMI provider passes the provider conformance suite: job records on disk, status faked."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

from fluence_core.api import Backend, names
from fluence_core.testing import TaskState, provider_conformance
from fluence_qrmi.provider import COMPLETED, FAILED, QUEUED, RUNNING, QrmiProvider, QrmiTask

STATUS = {"queued": QUEUED, "running": RUNNING, "completed": COMPLETED, "failed": FAILED}


class QrmiDouble:
    """The interceptor's job records in a scratch directory; the vendor's status scripted."""

    reports_position = False  # IBM Quantum reports no queue position
    backend = Backend("ibm_torino", {"provider": "qrmi", "vendor": "ibm", "backend": "ibm_torino"})
    foreign: Mapping[str, str] = {"provider": "braket"}

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="qrmi-conformance-"))
        self.statuses: list[str] = []
        self.provider = QrmiProvider(runtime_dir=self.directory, status_of=self._status)

    def _status(self, task: QrmiTask, backend: Backend) -> str:
        return self.statuses.pop(0)

    def will_list(self, pod_uid: str, state: TaskState | None) -> None:
        uid = pod_uid if state is not None else "someone-else"
        record = {"pod_uid": uid, "job_id": f"job-{uid}", "session": "session-1",
                  "backend": self.backend.name, "api": "qiskit-ibm-runtime"}
        (self.directory / names.JOB_RECORD_FILE).write_text(json.dumps(record) + "\n")

    def will_report(self, state: TaskState) -> None:
        self.statuses.append(STATUS[state.status])

    def close(self) -> None:
        shutil.rmtree(self.directory)
        assert not self.statuses, f"statuses never asked for: {self.statuses}"


test_provider_conformance = provider_conformance(QrmiDouble)
