"""Test helpers for Braket: the SDK's ``AwsSession`` over botocore's ``Stubber``.

Nothing leaves the process: the Stubber answers every call and the keys are fake.
"""

from __future__ import annotations

from typing import Any

REGION = "us-east-1"
DEVICE_ARN = "arn:aws:braket:us-west-1::device/qpu/rigetti/Cepheus-1-108Q"
TASK_ARN = "arn:aws:braket:us-east-1:123456789012:quantum-task/0f1e2d3c"


def stubbed_session(region: str = REGION) -> tuple[Any, Any]:
    """``(AwsSession, Stubber)``; activate the stubber (``with stubber:``) before calls."""
    import boto3
    from botocore.stub import Stubber
    from braket.aws import AwsSession

    boto_session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                                 region_name=region)
    client = boto_session.client("braket")
    return AwsSession(boto_session=boto_session, braket_client=client), Stubber(client)
