"""A user's program, unaware of Fluence: creates one Braket task.

Run by the staged-interceptor test in a fresh interpreter. The Braket client is
under botocore's Stubber, so the request stops at the AWS API boundary; this
prints what reached it.
"""

import importlib.util
import json

import boto3
from botocore.stub import Stubber
from braket.aws import AwsQuantumTask, AwsSession
from braket.circuits import Circuit

DEVICE = "arn:aws:braket:us-west-1::device/qpu/rigetti/Cepheus-1-108Q"
TASK = "arn:aws:braket:us-east-1:123456789012:quantum-task/0f1e2d3c"

boto_session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                             region_name="us-east-1")
client = boto_session.client("braket")
seen = {}


def capture(params, **_):
    seen.update(params)


client.meta.events.register("before-parameter-build.braket.CreateQuantumTask", capture)
stubber = Stubber(client)
stubber.add_response("create_quantum_task", {"quantumTaskArn": TASK})
with stubber:
    task = AwsQuantumTask.create(
        AwsSession(boto_session=boto_session, braket_client=client),
        DEVICE,
        Circuit().h(0).cnot(0, 1),
        ("amzn-braket-results", "qaoa"),
        shots=100,
    )
print(
    json.dumps(
        {
            "task": task.id,
            "request": {
                k: v
                for k, v in seen.items()
                if k in ("deviceArn", "shots", "outputS3Bucket", "tags")
            },
            "fluence_core_importable": importlib.util.find_spec("fluence_core") is not None,
        }
    )
)
