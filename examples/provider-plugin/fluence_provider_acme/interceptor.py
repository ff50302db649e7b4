"""Acme interceptor: every task the pod submits carries ``fluence-pod-uid=<uid>``.

``fluence stage`` copies this file alone into user containers, so it imports
only the standard library. Acme's SDK adds the labels listed in
``ACME_TASK_LABELS`` (comma-separated ``key=value``) to every task it submits;
installing the interceptor appends the pod's uid there, keeping the user's own.
"""

from __future__ import annotations

import os

LABELS = "ACME_TASK_LABELS"
KEY = "fluence-pod-uid"


def install_interceptor(pod_uid: str) -> bool:
    """Label every task this process submits; False (never an exception) on a bad uid."""
    if not pod_uid or "," in pod_uid or "=" in pod_uid:
        return False
    kept = [label for label in os.environ.get(LABELS, "").split(",")
            if label and not label.startswith(KEY + "=")]
    os.environ[LABELS] = ",".join(kept + [f"{KEY}={pod_uid}"])
    return True
