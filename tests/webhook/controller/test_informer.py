"""The webhook's informers: PodGroups and labelled Jobs looked up without an API call (issue 20),
and what admission does with them."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import pytest

from fluence_core import names
from fluence_core.kube.api import JOBS, PODGROUPS, RESYNC
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.webhook import BackgroundWriter
from fluence_core.webhook.controller import informer
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.controller.informer import Informer, Watched, slim_pod_group, watched_for
from fluence_core.webhook.admission.handlers.job_group import JobGroupHandler
from fluence_core.webhook.controller.pod_groups import pod_group_body
from fluence_core.webhook.admission.review import AdmissionService
from tests.webhook.admission.handlers.test_job_group import _review_job, job
from tests.webhook.webhook_helpers import Counting, admit, pod


def synced(cluster: FakeCluster) -> Watched:
    watched = watched_for(cluster)
    for each in watched.informers():
        each.sync()
    return watched


def test_an_informer_knows_nothing_until_its_first_list(cluster) -> None:
    cluster.create(PODGROUPS, pod_group_body("train", "default", 4), "default")
    pod_groups = Informer(cluster, PODGROUPS, slim_pod_group)
    assert pod_groups.lookup("default", "train") == (False, None)
    pod_groups.sync()
    known, found = pod_groups.lookup("default", "train")
    assert known and found["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert found["metadata"] == {"name": "train", "namespace": "default",
                                 "uid": found["metadata"]["uid"]}  # slim: no labels, no status
    assert pod_groups.lookup("default", "other") == (True, None)  # known not to exist


def test_an_informer_follows_adds_changes_and_deletes(cluster) -> None:
    pod_groups = Informer(cluster, PODGROUPS, slim_pod_group)
    pod_groups.sync()
    cluster.create(PODGROUPS, pod_group_body("train", "default", 4), "default")
    pod_groups.follow(timeout=0)
    assert pod_groups.lookup("default", "train")[1] is not None
    modified = pod_group_body("train", "default", 4)  # spec is immutable: a copy's is not
    modified["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    pod_groups.apply("MODIFIED", modified)
    assert pod_groups.lookup("default", "train")[1]["metadata"]["deletionTimestamp"]
    cluster.delete(PODGROUPS, "train", "default")
    pod_groups.follow(timeout=0)
    assert pod_groups.lookup("default", "train") == (True, None)


def test_a_resync_replaces_everything(cluster) -> None:
    pod_groups = Informer(cluster, PODGROUPS, slim_pod_group)
    pod_groups.sync()
    pod_groups.apply("ADDED", pod_group_body("old", "default", 2))
    pod_groups.apply(RESYNC, {"items": [pod_group_body("new", "default", 3)],
                              "metadata": {"resourceVersion": "99"}})
    assert pod_groups.lookup("default", "old") == (True, None)
    assert pod_groups.lookup("default", "new")[1] is not None
    assert len(pod_groups) == 1


def test_the_job_informer_keeps_labelled_jobs_only_and_a_slim_copy(cluster) -> None:
    labelled = job()
    labelled["metadata"]["labels"] = {names.GROUP_LABEL: "train"}
    cluster.create(JOBS, labelled, "default")  # beside the fixture's unlabelled Job "qj"
    jobs = synced(cluster).jobs
    assert jobs is not None and len(jobs) == 1
    _, kept = jobs.lookup("default", "train")
    assert kept["spec"] == {"parallelism": 4, "completions": 4,
                            "template": {"metadata": {"labels": {names.GROUP_LABEL: "train"}}}}
    assert kept["metadata"]["uid"]


class BrokenWatch:
    """The cluster boundary whose lists and watches fail while ``broken`` is set (so the
    informer stays unsynced until it is cleared); ``lists`` counts the lists served."""

    def __init__(self, inner: FakeCluster) -> None:
        self.inner = inner
        self.broken = threading.Event()
        self.lists = 0

    def list(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken.is_set():
            raise ApiError(500, "etcd is on fire")
        self.lists += 1
        return self.inner.list(*args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if self.broken.is_set():
            raise ApiError(500, "etcd is on fire")
        kwargs["timeout"] = 0.05
        yield from self.inner.watch(*args, **kwargs)


def _until(condition: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_a_broken_watch_makes_lookups_unknown_until_a_list_succeeds(
        cluster, monkeypatch, caplog) -> None:
    monkeypatch.setattr(informer, "RETRY_SECONDS", 0.05)
    boundary = BrokenWatch(cluster)
    pod_groups = Informer(boundary, PODGROUPS, slim_pod_group)  # type: ignore[arg-type]
    pod_groups.start()
    try:
        assert pod_groups.wait_synced(10)
        boundary.broken.set()
        assert _until(lambda: not pod_groups.synced)
        assert pod_groups.lookup("default", "train") == (False, None)  # unknown: callers read
        assert _until(lambda: "watching podgroups failed (500: etcd is on fire)" in caplog.text)
        cluster.create(PODGROUPS, pod_group_body("train", "default", 4), "default")
        lists = boundary.lists
        boundary.broken.clear()
        assert _until(lambda: pod_groups.synced and boundary.lists > lists)
        assert pod_groups.lookup("default", "train")[1] is not None  # the new list has it
    finally:
        pod_groups.stop()


def test_stopping_an_informer_ends_its_watch_in_flight_at_once(cluster) -> None:
    pod_groups = Informer(cluster, PODGROUPS, slim_pod_group)
    assert pod_groups.watch_seconds >= 60  # a watch request that would outlast any stop
    pod_groups.start()
    try:
        assert pod_groups.wait_synced(10)
        cluster.create(PODGROUPS, pod_group_body("train", "default", 4), "default")
        assert _until(lambda: pod_groups.lookup("default", "train")[1] is not None)
    finally:  # the watch delivered that, and now waits for the next change
        started = time.monotonic()
        pod_groups.stop(timeout=5.0)
        stopped = time.monotonic() - started
    assert stopped < 1.0  # stop joins for up to 5 s: it returned because the thread ended


def test_unwatched_lookups_read_as_before(cluster) -> None:
    counting = Counting(cluster)
    assert Watched().pod_group(counting, "default", "train") is None  # type: ignore[arg-type]
    unsynced = watched_for(cluster)
    assert unsynced.pod_group(counting, "default", "train") is None  # type: ignore[arg-type]
    assert counting.calls == ["get podgroups", "get podgroups"]


# -- what admission does with them ---------------------------------------------------------

def test_a_job_whose_group_has_a_watched_pod_group_of_another_size_is_refused_unread(
        settings, cluster) -> None:
    cluster.create(PODGROUPS, pod_group_body("train", "default", 8), "default")
    counting = Counting(cluster)
    service = AdmissionService(settings, [JobGroupHandler()], cluster=counting,
                               watched=synced(cluster))
    response, _ = _review_job(service, job())
    assert response["allowed"] is False
    assert "PodGroup default/train has minCount 8, but this gang needs 4" in (
        response["status"]["message"])
    assert counting.calls == []


def test_a_jobs_admission_and_pod_group_write_read_nothing_when_watched(settings, cluster) -> None:
    counting = Counting(cluster)
    watched = synced(cluster)
    now = [0.0]  # the writer's clock: its first look waits until the test moves it
    writer = BackgroundWriter(clock=lambda: now[0])
    service = AdmissionService(settings, [JobGroupHandler()], cluster=counting, writer=writer,
                               watched=watched)
    response, patched = _review_job(service, job())
    assert response["allowed"] is True and counting.calls == []
    assert patched["metadata"]["labels"] == {names.GROUP_LABEL: "train"}
    stored = cluster.create(JOBS, patched, "default")  # by the API server, after the answer
    assert watched.jobs is not None
    service.controller.informers()  # the controller listens to the Job informer
    watched.jobs.follow(timeout=0)
    now[0] += 1.0
    assert writer.flush(10)
    writer.close()
    assert counting.calls == ["create podgroups"]  # no read of the PodGroup, none of the Job
    made = cluster.get(PODGROUPS, "train", "default")
    assert made["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]


def test_the_job_label_is_added_once_and_kept_when_the_user_set_one(settings, cluster) -> None:
    service = AdmissionService(settings, [JobGroupHandler()], cluster=cluster)
    _, patched = _review_job(service, job(), dry_run=True)
    again, repatched = _review_job(service, patched, dry_run=True)
    assert "patch" not in again and repatched == patched  # a re-invocation changes nothing
    theirs = job()
    theirs["metadata"]["labels"] = {names.GROUP_LABEL: "their-own", "team": "a"}
    _, patched = _review_job(service, theirs, dry_run=True)
    assert patched["metadata"]["labels"] == {names.GROUP_LABEL: "their-own", "team": "a"}
    assert patched["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "train"}


@pytest.mark.parametrize("size, allowed", [("4", True), ("2", False)])
def test_a_gang_pod_checks_a_watched_pod_group_and_makes_none(
        settings, cluster, size: str, allowed: bool) -> None:
    cluster.create(PODGROUPS, pod_group_body("train", "default", 4), "default")
    counting = Counting(cluster)
    service = AdmissionService(settings, [GangHandler()], cluster=counting,
                               watched=synced(cluster))
    member = pod("train-0", group="train", annotations={names.GROUP_SIZE_ANNOTATION: size})
    response, _ = admit(service, member)
    assert response["allowed"] is allowed
    if not allowed:
        assert "has minCount 4, but this gang needs 2" in response["status"]["message"]
    assert counting.calls == []  # neither a create answered "already exists" nor a read




def test_a_bare_gangs_pod_whose_pod_group_is_being_deleted_is_refused(settings,
                                                                      cluster) -> None:
    """Issue 32: a PodGroup being deleted was still used by a bare gang (its protection
    finalizer would keep it while the new gang's pods point at it)."""
    watched = synced(cluster)
    ending = pod_group_body("train", "default", 4)
    ending["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert watched.pod_groups is not None
    watched.pod_groups.apply("MODIFIED", ending)
    service = AdmissionService(settings, [GangHandler()], cluster=cluster, watched=watched)
    member = pod("train-0", group="train", annotations={names.GROUP_SIZE_ANNOTATION: "4"})
    response, _ = admit(service, member, store=False)
    assert response["allowed"] is False
    assert "PodGroup default/train (minCount 4) is being deleted" in response["status"]["message"]
