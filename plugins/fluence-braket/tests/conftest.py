"""Braket tests run the real SDK over a botocore Stubber: no credentials, no network."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.stub import Stubber

from fluence_braket.testing import stubbed_session


@pytest.fixture
def aws() -> Iterator[tuple[object, Stubber]]:
    session, stubber = stubbed_session()
    with stubber:
        yield session, stubber
    stubber.assert_no_pending_responses()


@pytest.fixture
def restore_sdk() -> Iterator[None]:
    """Undo the interceptor's patches after a test that installs it in process."""
    from braket.aws.aws_session import AwsSession
    from braket.devices import LocalSimulator

    original, local = AwsSession.create_quantum_task, LocalSimulator.run
    yield
    AwsSession.create_quantum_task, LocalSimulator.run = original, local
