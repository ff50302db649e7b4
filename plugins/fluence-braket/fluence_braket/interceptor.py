"""Braket interceptor: every task the pod creates is tagged ``fluence-pod-uid=<uid>``.

Self-contained on purpose (standard library + the Braket SDK, imported lazily):
``fluence stage`` copies this file into user containers that have nothing else
of Fluence. It wraps ``AwsSession.create_quantum_task``, the one call every
task creation in the SDK goes through (``AwsDevice.run``, ``run_batch``,
``AwsQuantumTask.create``).

The local simulator has no tags and no service to ask: ``LocalSimulator.run``
is wrapped too, so each local task gets ``task.tags`` with the same tag and a
line in ``$FLUENCE_RUNTIME_DIR/jobs.jsonl`` (``api: braket-local``), where the
sidecar finds it without AWS. That is the path a pod with no AWS credentials
takes end to end.
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

TAG_KEY = names.TASK_TAG_KEY
LOCAL_API = "braket-local"
"""The ``api`` of a job record the local simulator's wrapper writes."""
_MARK = "_fluence_pod_uid"


def _record_local(pod_uid: str, task: Any) -> None:
    """Tag a finished local task and append it to the sidecar's job record (never raises)."""
    try:
        task.tags = {**dict(getattr(task, "tags", None) or {}), TAG_KEY: pod_uid}
        directory = Path(os.environ.get(names.ENV_RUNTIME_DIR) or names.RUNTIME_MOUNT)
        directory.mkdir(parents=True, exist_ok=True)
        line = {"pod_uid": pod_uid, "job_id": str(task.id), "session": None,
                "backend": os.environ.get(names.ENV_BACKEND), "api": LOCAL_API,
                "status": str(task.state()), "tags": task.tags, "time": time.time()}
        with (directory / names.JOB_RECORD_FILE).open("a") as out:
            out.write(json.dumps(line) + "\n")
        sys.stderr.write(f"[fluence] local task {task.id} tagged {TAG_KEY}={pod_uid}, "
                         f"recorded in {directory / names.JOB_RECORD_FILE}\n")
    except Exception:
        pass


def _wrap_local_simulator(pod_uid: str) -> bool:
    try:
        from braket.devices import LocalSimulator
    except Exception:
        return False
    current = LocalSimulator.run
    if hasattr(current, _MARK):
        setattr(current, _MARK, pod_uid)
        return True
    original = current

    @functools.wraps(original)
    def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        task = original(self, *args, **kwargs)
        _record_local(getattr(run, _MARK), task)
        return task

    setattr(run, _MARK, pod_uid)
    LocalSimulator.run = run
    return True


def _wrap_aws_session(pod_uid: str) -> bool:
    try:
        from braket.aws.aws_session import AwsSession
    except Exception:
        return False
    current = AwsSession.create_quantum_task
    if hasattr(current, _MARK):  # installed before: only the uid changes
        setattr(current, _MARK, pod_uid)
        return True
    original = current

    @functools.wraps(original)
    def create_quantum_task(self, **boto3_kwargs):  # type: ignore[no-untyped-def]
        tags = dict(boto3_kwargs.get("tags") or {})
        tags[TAG_KEY] = getattr(create_quantum_task, _MARK)
        boto3_kwargs["tags"] = tags
        return original(self, **boto3_kwargs)

    setattr(create_quantum_task, _MARK, pod_uid)
    AwsSession.create_quantum_task = create_quantum_task
    return True


def install_interceptor(pod_uid: str) -> bool:
    """Tag every task created through the SDK, on AWS or the local simulator; False (never
    an exception) without the SDK."""
    try:
        aws = _wrap_aws_session(pod_uid)
        local = _wrap_local_simulator(pod_uid)
        return aws or local
    except Exception:
        return False
