"""QRMI / qiskit-ibm-runtime interceptor: record each job, hold the scout's session.

Self-contained (standard library + the SDKs, imported lazily): ``fluence stage``
copies this file into user containers. QRMI has no tags, so the job id and the
session id go to ``$FLUENCE_RUNTIME_DIR/jobs.jsonl``, where the sidecar reads
them. In the scout, closing a session waits for the sidecar's release marker
(the workers are done with the session) up to ``FLUENCE_SESSION_HOLD_TIMEOUT``.

qiskit-ibm-runtime's local testing mode (a fake backend, no account) returns a
``LocalRuntimeJob`` that runs in this process: its record says ``api:
qiskit-ibm-runtime-local`` and the status it had when submitted, which is all
the sidecar can know of it.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

try:  # staged into a user container
    from fluence_staged import names
except ImportError:  # installed next to fluence-core
    from fluence_core.api import names  # type: ignore[no-redef]

_MARK = "_fluence_pod_uid"
RUNTIME_API = "qiskit-ibm-runtime"
LOCAL_API = "qiskit-ibm-runtime-local"
"""The ``api`` of a job run by qiskit-ibm-runtime's local testing mode."""
_sleep = time.sleep
_clock = time.monotonic
_state: dict[str, str] = {}


def runtime_dir() -> Path:
    return Path(os.environ.get(names.ENV_RUNTIME_DIR) or names.RUNTIME_MOUNT)


def record(job_id: str, session: str | None, backend: str | None, api: str,
           status: str | None = None) -> None:
    """Append one job to the record the sidecar reads (never raises)."""
    try:
        directory = runtime_dir()
        directory.mkdir(parents=True, exist_ok=True)
        line = {"pod_uid": _state.get("pod_uid", ""), "job_id": job_id, "session": session,
                "backend": backend, "api": api, "time": time.time()}
        if status is not None:
            line["status"] = status
        with (directory / names.JOB_RECORD_FILE).open("a") as out:
            out.write(json.dumps(line) + "\n")
        sys.stderr.write(f"[fluence] {api} job {job_id} of pod {line['pod_uid']} recorded in "
                         f"{directory / names.JOB_RECORD_FILE}\n")
    except Exception:
        pass


def wait_for_release() -> bool:
    """In the scout: block until the sidecar writes the release marker (or the hold times out).

    It says so on stderr when it starts to wait: a scout whose work is done but whose
    container still runs tells its log why (and a test waits on that line, not on a clock).
    """
    if os.environ.get(names.ENV_ROLE) != names.ROLE_SCOUT:
        return True
    try:
        limit = float(os.environ.get(names.ENV_SESSION_HOLD_TIMEOUT) or 0)
    except ValueError:
        limit = 0.0
    marker = runtime_dir() / names.RELEASE_MARKER_FILE
    deadline = None if limit <= 0 else _clock() + limit
    if not marker.exists():
        sys.stderr.write(f"[fluence] holding the session for the workers until {marker} "
                         "exists\n")
        sys.stderr.flush()
    while not marker.exists():
        if deadline is not None and _clock() >= deadline:
            return False
        _sleep(1.0)
    return True


def _wrap_runtime_primitives() -> bool:
    try:
        from qiskit_ibm_runtime.base_primitive import BasePrimitiveV2
        from qiskit_ibm_runtime.session import Session
    except Exception:
        return False
    if not hasattr(BasePrimitiveV2._run, _MARK):
        original_run = BasePrimitiveV2._run

        @functools.wraps(original_run)
        def _run(self: Any, *args: Any, **kwargs: Any) -> Any:
            job = original_run(self, *args, **kwargs)
            try:
                mode = getattr(self, "_mode", None)
                backend = getattr(self, "_backend", None)
                local = type(job).__name__ == "LocalRuntimeJob"
                status = getattr(job.status(), "name", None) if local else None
                record(str(job.job_id()), getattr(mode, "session_id", None) if mode else None,
                       getattr(backend, "name", None), LOCAL_API if local else RUNTIME_API,
                       status)
            except Exception:
                pass
            return job

        setattr(_run, _MARK, True)
        BasePrimitiveV2._run = _run
    if not hasattr(Session.close, _MARK):
        original_close = Session.close

        @functools.wraps(original_close)
        def close(self: Any) -> None:
            wait_for_release()
            original_close(self)

        setattr(close, _MARK, True)
        Session.close = close  # Batch inherits it; __exit__ calls it
    return True


def _wrap_qrmi_jobs() -> bool:
    try:
        from qrmi.primitives import runtime_job_v2
    except Exception:
        return False
    job_class = runtime_job_v2.RuntimeJobV2
    if hasattr(job_class.__init__, _MARK):
        return True
    original_init = job_class.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, qrmi: Any, job_id: str, *args: Any, **kwargs: Any) -> None:
        original_init(self, qrmi, job_id, *args, **kwargs)
        try:
            resource = qrmi.resource_id() if hasattr(qrmi, "resource_id") else None
        except Exception:
            resource = None
        record(str(job_id), os.environ.get("QRMI_IBM_QRS_SESSION_ID"), resource, "qrmi")

    setattr(__init__, _MARK, True)
    job_class.__init__ = __init__
    return True


def install_interceptor(pod_uid: str) -> bool:
    """Record every job the pod submits; False (never an exception) when neither SDK is there."""
    try:
        _state["pod_uid"] = pod_uid
        runtime = _wrap_runtime_primitives()
        direct = _wrap_qrmi_jobs()
        return runtime or direct
    except Exception:
        return False
