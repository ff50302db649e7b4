"""Issue 32, attack 1: anyone who reaches the webhook's port POSTs a forged AdmissionReview.

Fluence used to act on it with its own rights: a PodGroup of minCount 999 in another
team's namespace (their real Job then refused), a Flux Job's ConfigMap, Secret and
Service wherever the review said. A review proves nothing: the webhook, built as
``fluence webhook`` builds it (every plugin, a background writer), must answer it and
change nothing in the cluster, nor remember anything that changes a later answer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import CONFIGMAPS, PODGROUPS, SECRETS, SERVICES
from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict
from fluence_core.webhook import BackgroundWriter, build_service
from fluence_core.webhook.admission.review import AdmissionService

VICTIM = "team-b"


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster()
    for namespace in ("team-a", VICTIM):
        fake.create("namespaces", {"metadata": {"name": namespace}})
    return fake


@pytest.fixture
def service(cluster: FakeCluster) -> Any:
    settings = load_settings(runtime_image="example.org/fluence:test")
    built = build_service(settings, get_plugin_manager(settings), cluster,
                          writer=BackgroundWriter())
    yield built
    assert built.writer is not None
    built.writer.close(timeout=10)


def _job(name: str, size: int, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": VICTIM, "annotations": annotations},
            "spec": {"completionMode": "Indexed", "parallelism": size, "completions": size,
                     "template": {"metadata": {"labels": {names.GROUP_LABEL: name}},
                                  "spec": {"schedulerName": names.SCHEDULER_NAME,
                                           "restartPolicy": "Never",
                                           "containers": [{"name": "app", "image": "busybox",
                                                           "command": ["sleep", "1"]}]}}}}


def _forge(obj: dict[str, Any], resource: str, group: str = "") -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "forged", "operation": "CREATE",
                                   "namespace": VICTIM,
                                   "kind": {"group": group, "version": "v1",
                                            "kind": obj["kind"]},
                                   "resource": {"group": group, "version": "v1",
                                                "resource": resource},
                                   "object": obj}}).encode()


def _settle(service: AdmissionService) -> None:
    assert service.writer is not None and service.writer.flush(10)


def test_a_forged_job_review_for_another_namespace_makes_no_pod_group(
        service: AdmissionService, cluster: FakeCluster) -> None:
    answer = service.review(_forge(_job("train", 999), "jobs", "batch")).response
    assert answer["allowed"] is True  # answered as any review: nothing checks who sent it
    _settle(service)
    assert cluster.list(PODGROUPS, VICTIM).items == []


def test_the_victims_real_job_is_admitted_after_a_forged_one(
        service: AdmissionService) -> None:
    service.review(_forge(_job("train", 999), "jobs", "batch"))
    _settle(service)
    real = service.review(_forge(_job("train", 4), "jobs", "batch")).response
    assert real["allowed"] is True, real.get("status")


def test_a_forged_gang_pod_review_makes_no_pod_group_and_leaves_no_memory(
        service: AdmissionService, cluster: FakeCluster) -> None:
    def gang_pod(size: int) -> dict[str, Any]:
        return make_pod_dict("g-0", None, namespace=VICTIM, labels={names.GROUP_LABEL: "g"},
                             annotations={names.GROUP_SIZE_ANNOTATION: str(size)})

    assert service.review(_forge(gang_pod(999), "pods")).response["allowed"] is True
    _settle(service)
    assert cluster.list(PODGROUPS, VICTIM).items == []
    real = service.review(_forge(gang_pod(4), "pods")).response
    assert real["allowed"] is True, real.get("status")
def test_a_forged_flux_job_review_makes_no_configmap_secret_or_service(
        service: AdmissionService, cluster: FakeCluster) -> None:
    flux = _job("sim", 2, **{names.FLUX_ANNOTATION: "true"})
    answer = service.review(_forge(flux, "jobs", "batch")).response
    assert answer["allowed"] is True, answer.get("status")
    _settle(service)
    for resource in (CONFIGMAPS, SECRETS, SERVICES, PODGROUPS):
        assert cluster.list(resource, VICTIM).items == [], resource.plural
