from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # webhook_helpers, under --import-mode=importlib

from fluence_core.kube.fake import FakeCluster
from fluence_core.resource_config import parse_resource_config
from fluence_core.settings import Settings, load_settings
from fluence_core.webhook.admission.handlers.fluxion_env import FluxionEnvHandler
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.hybrid.split import QuantumSplitHandler
from fluence_core.webhook.admission.review import AdmissionService
from fluence_core.webhook.controller.writer import BackgroundWriter

RESOURCES = """
resources:
  - type: qdevice
    attributes: {provider: braket, region: us-east-1, device-arn: "arn:aws:x"}
    with: [{type: qpu}]
"""


@pytest.fixture
def settings() -> Settings:
    return load_settings(runtime_image="example.org/fluence:test")


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.create("jobs", {"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": "qj", "namespace": "default"},
                         "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed",
                                  "template": {"spec": {"containers": []}}}}, "default")
    return fake


@pytest.fixture
def config():
    return parse_resource_config(RESOURCES, "test.yaml")


@pytest.fixture
def service(settings, cluster, config) -> AdmissionService:
    """The three built-ins in their default order, no admission control."""
    handlers = [
        QuantumSplitHandler(settings),
        GangHandler(),
        FluxionEnvHandler(config.attribute_keys),
    ]
    return AdmissionService(settings, handlers, cluster=cluster, resource_config=config)


@pytest.fixture
def sleeps() -> list[float]:
    """The back-off waits the ``writer`` fixture's writer asked for (it never really sleeps)."""
    return []


@pytest.fixture
def writer(sleeps):
    """A background PodGroup writer whose back-off records into ``sleeps``; closed after."""
    made = BackgroundWriter(sleep=sleeps.append)
    yield made
    made.close(timeout=10)
