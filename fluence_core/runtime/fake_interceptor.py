"""The fake vendor's interceptor half: self-contained, like every staged interceptor.

The fake vendor (:mod:`fluence_core.runtime.fake_provider`) scripts tasks by pod
uid already, so there is no SDK to patch; installing records the uid where an
SDK would read its task tags, which is all a test can observe.
"""

from __future__ import annotations

import os

TAG_VARIABLE = "FAKE_VENDOR_TASK_TAGS"


def install_interceptor(pod_uid: str) -> bool:
    """Tag every task this process submits with ``fluence-pod-uid=<pod_uid>``."""
    os.environ[TAG_VARIABLE] = f"fluence-pod-uid={pod_uid}"
    return True
