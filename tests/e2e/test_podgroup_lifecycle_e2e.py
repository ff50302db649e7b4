"""The PodGroups Fluence's webhook makes go away with what they were made for, on a real
kube-apiserver with kube-controller-manager (its garbage collector and PodGroup protection).

* A grouped Job's PodGroup is owned by the Job: deleting the Job deletes it.
* A Job refused after Fluence's webhook answered is never stored: no PodGroup is left.
* A gang of bare pods has no owner: once no live pod points at its PodGroup and the
  PodGroup is older than the grace, the webhook's cleanup deletes it.
* A group name names one gang at a time: a Job or pod asking for another size than the
  existing PodGroup's is refused, naming both.

Skipped without KUBEBUILDER_ASSETS or kube-controller-manager.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import Settings, load_settings
from fluence_core.testing import make_pod_dict
from fluence_core.testing_apiserver import ApiServer, wait_for, webhook_beside
from fluence_core.webhook import BackgroundWriter, build_service
from fluence_core.webhook.controller.cleanup import cleanup_for
from tests.webhook.webhook_helpers import Counting

pytestmark = pytest.mark.e2e

GRACE = 5.0


@pytest.fixture
def settings(apiserver: ApiServer, kube_namespace: str) -> Settings:
    if not apiserver.controller_manager:
        pytest.skip("no kube-controller-manager beside the API server binaries (no GC)")
    return load_settings(webhook_config=f"fluence-lifecycle-{kube_namespace}",
                         webhook_podgroup_cleanup=0.5, webhook_podgroup_grace=GRACE)


def job_body(name: str, group: str, size: int, **template_spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "completionMode": "Indexed", "completions": size, "parallelism": size,
        "template": {"metadata": {"labels": {names.GROUP_LABEL: group}}, "spec": {
            "schedulerName": names.SCHEDULER_NAME, "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}], **template_spec}}}}


def bare_pod(name: str, group: str, size: int) -> dict[str, Any]:
    """A pod of bare gang ``group`` of ``size``: no Job, no owner."""
    return make_pod_dict(name, None, namespace=None, labels={names.GROUP_LABEL: group},
                         annotations={names.GROUP_SIZE_ANNOTATION: str(size)})


def test_a_jobs_podgroup_is_owned_by_it_and_deleted_with_it(
        kube: KubeCluster, kube_namespace: str, settings: Settings, tmp_path: Path) -> None:
    ns = kube_namespace
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                        resources=("pods", "jobs")):
        job = kube.create("jobs", job_body("train", "train", 2), ns)
        group = wait_for(lambda: kube.get("podgroups", "train", ns),
                         "the Job's PodGroup, made once the Job is stored")
        assert group["spec"]["schedulingPolicy"]["gang"] == {"minCount": 2}
        [owner] = group["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "Job", "train", job["metadata"]["uid"])
        wait_for(lambda: len(kube.list("pods", ns, label_selector=names.GROUP_LABEL).items)
                 == 2, "the Job's two pods, made by the job controller")
        kube.delete("jobs", "train", ns, propagation="Background")  # as kubectl does
        wait_for(lambda: kube.get("podgroups", "train", ns) is None,
                 "the PodGroup deleted by the garbage collector with its Job")


def test_a_job_refused_after_the_webhook_answered_leaves_no_podgroup(
        kube: KubeCluster, kube_namespace: str, settings: Settings, tmp_path: Path) -> None:
    ns = kube_namespace
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                        resources=("pods", "jobs")) as server:
        invalid = job_body("bad", "bad", 2, restartPolicy="Always")  # refused by validation
        with pytest.raises(ApiError) as refused:
            kube.create("jobs", invalid, ns)
        assert refused.value.status == 422
        assert server.service.writer is not None
        time.sleep(2)  # the controller acts on stored Jobs only: this one never is
        assert kube.get("podgroups", "bad", ns) is None
        assert not server.service.writer.holds(("podgroups", ns, "bad"))  # nothing waits
    assert kube.get("podgroups", "bad", ns) is None


def test_a_bare_gangs_podgroup_is_deleted_after_the_grace_once_its_pods_are_gone(
        kube: KubeCluster, kube_namespace: str, settings: Settings, tmp_path: Path) -> None:
    ns = kube_namespace
    service = build_service(settings, get_plugin_manager(settings), kube,
                            writer=BackgroundWriter())
    cleanup = cleanup_for(service)
    assert cleanup is not None
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns, service=service,
                        loops=[cleanup]):
        for i in range(2):
            kube.create("pods", bare_pod(f"b-{i}", "b", 2), ns)
        made = wait_for(lambda: kube.get("podgroups", "b", ns), "the gang's PodGroup")
        started = time.monotonic()
        assert "ownerReferences" not in made["metadata"]
        for i in range(2):  # the gang ends (never bound here: deleted at once)
            kube.delete("pods", f"b-{i}", ns, grace_period_seconds=0)
        time.sleep(1.5)  # a few cleanup passes: too young yet
        if time.monotonic() - started < GRACE - 1:
            assert kube.get("podgroups", "b", ns) is not None
        wait_for(lambda: kube.get("podgroups", "b", ns) is None,
                 "the PodGroup deleted by the webhook's cleanup")
        assert time.monotonic() - started >= GRACE - 1  # its creationTimestamp has seconds
        assert cleanup.deleted >= 1  # with what earlier tests left on this shared server


def test_a_group_name_in_use_refuses_a_gang_of_another_size_naming_both(
        kube: KubeCluster, kube_namespace: str, settings: Settings, tmp_path: Path) -> None:
    ns = kube_namespace
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                        resources=("pods", "jobs")):
        kube.create("jobs", job_body("first", "g", 2), ns)
        wait_for(lambda: kube.get("podgroups", "g", ns), "the first Job's PodGroup")
        with pytest.raises(ApiError) as refused:
            kube.create("jobs", job_body("second", "g", 3), ns)
        assert "PodGroup " + ns + "/g has minCount 2, but this gang needs 3" in str(
            refused.value)
        assert kube.get("jobs", "second", ns) is None
        kube.create("pods", bare_pod("p-0", "p", 2), ns)
        wait_for(lambda: kube.get("podgroups", "p", ns), "the gang's PodGroup, from p-0 stored")
        with pytest.raises(ApiError) as refused:
            kube.create("pods", bare_pod("p-1", "p", 3), ns)
        assert "PodGroup " + ns + "/p has minCount 2, but this gang needs 3" in str(
            refused.value)
        kube.delete("jobs", "first", ns, propagation="Background")


def test_grouped_jobs_are_admitted_with_no_read_and_one_write_each(
        kube: KubeCluster, kube_namespace: str, settings: Settings, tmp_path: Path) -> None:
    """Issue 20: the webhook's informers serve the lookups a Job's admission and its
    PodGroup's owner need, so the only call per Job is the PodGroup's create (a Job the
    watch has not delivered within a second of the first look would be read)."""
    from fluence_core.webhook.controller.informer import watched_for

    ns = kube_namespace
    counting = Counting(kube)
    # Informers of this namespace only: the API server is shared, and another test's pod
    # left pending elsewhere would have its own Job read, counted here.
    watched = watched_for(kube, ns)
    service = build_service(settings, get_plugin_manager(settings), counting,  # type: ignore[arg-type]
                            writer=BackgroundWriter(), watched=watched)
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                        resources=("pods", "jobs"), service=service,
                        loops=watched.informers()):
        assert all(informer.wait_synced(30) for informer in watched.informers())
        jobs = [kube.create("jobs", job_body(f"j{i}", f"j{i}", 2), ns) for i in range(5)]
        for job in jobs:
            assert job["metadata"]["labels"][names.GROUP_LABEL] == job["metadata"]["name"]
        for i in range(5):
            made = wait_for(lambda: kube.get("podgroups", f"j{i}", ns), f"PodGroup j{i}")
            assert made["metadata"]["ownerReferences"][0]["uid"] == (
                jobs[i]["metadata"]["uid"])
    assert counting.calls.count("create podgroups") == 5
    assert "get podgroups" not in counting.calls  # the admission's lookup: the informer
    assert "get jobs" not in counting.calls  # the PodGroup's owner: the Job informer
