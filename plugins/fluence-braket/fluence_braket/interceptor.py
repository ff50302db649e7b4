"""Braket interceptor: every task the pod creates is tagged ``fluence-pod-uid=<uid>``.

Self-contained on purpose (standard library + the Braket SDK, imported lazily):
``fluence stage`` copies this file into user containers that have nothing else
of Fluence. It wraps ``AwsSession.create_quantum_task``, the one call every
task creation in the SDK goes through (``AwsDevice.run``, ``run_batch``,
``AwsQuantumTask.create``).
"""

from __future__ import annotations

import functools

try:  # staged into a user container
    from fluence_staged import names
except ImportError:  # installed next to fluence-core
    from fluence_core.api import names  # type: ignore[no-redef]

TAG_KEY = names.TASK_TAG_KEY
_MARK = "_fluence_pod_uid"


def install_interceptor(pod_uid: str) -> bool:
    """Tag every task created through the SDK; False (never an exception) without the SDK."""
    try:
        from braket.aws.aws_session import AwsSession
    except Exception:
        return False
    try:
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
    except Exception:
        return False
