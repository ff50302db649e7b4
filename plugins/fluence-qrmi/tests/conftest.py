from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def restore_sdk() -> Iterator[None]:
    """Undo the interceptor's patches after a test that installs it in process."""
    from qiskit_ibm_runtime.base_primitive import BasePrimitiveV2
    from qiskit_ibm_runtime.session import Session
    from qrmi.primitives import runtime_job_v2

    saved = (BasePrimitiveV2._run, Session.close, runtime_job_v2.RuntimeJobV2.__init__)
    yield
    BasePrimitiveV2._run, Session.close, runtime_job_v2.RuntimeJobV2.__init__ = saved
