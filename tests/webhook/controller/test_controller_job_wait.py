"""A Job's pod whose watch event beats its Job's: the controller waits for the Job's event
instead of reading the Job, and reads it only when the Job does not come in time."""

from __future__ import annotations

from typing import Any

from fluence_core import names
from fluence_core.kube.api import JOBS, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import Settings
from fluence_core.webhook import BackgroundWriter
from fluence_core.webhook.controller.controller import JOB_WAIT
from fluence_core.webhook.controller.informer import Watched, watched_for
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.admission.handlers.job_group import JobGroupHandler
from fluence_core.webhook.admission.review import AdmissionService
from tests.webhook.admission.handlers.test_job_group import job
from tests.webhook.webhook_helpers import Counting, admit, pod


class Race:
    """A webhook whose informers are synced over ``cluster`` and whose controller and writer
    share a clock the test moves (``now``); ``counting`` records the controller's calls."""

    def __init__(self, settings: Settings, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.counting = Counting(cluster)
        self.watched: Watched = watched_for(cluster)
        for each in self.watched.informers():
            each.sync()
        self.now = [0.0]
        self.writer = BackgroundWriter(clock=self.clock)
        service = AdmissionService(settings, [JobGroupHandler()], cluster=self.counting,
                                   writer=self.writer, watched=self.watched, clock=self.clock)
        service.controller.informers()  # listening to the Job and pod informers

    def clock(self) -> float:
        return self.now[0]

    def store_job_and_its_pod(self) -> dict[str, Any]:
        """A grouped Job as its admission left it, and its first pod, both stored; only the
        pod's event is delivered."""
        body = job()
        body["metadata"]["labels"] = {names.GROUP_LABEL: "train"}
        body["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "train"}
        stored = self.cluster.create(JOBS, body, "default")
        its_pod = pod("train-0", group="train", index=0,
                      schedulingGroup={"podGroupName": "train"})
        its_pod["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train",
             "uid": stored["metadata"]["uid"], "controller": True}]
        self.cluster.create(PODS, its_pod, "default")
        assert self.watched.pods is not None
        self.watched.pods.follow(timeout=0)
        return stored

    def deliver_jobs(self) -> None:
        assert self.watched.jobs is not None
        self.watched.jobs.follow(timeout=0)


def test_a_pod_event_before_its_jobs_waits_for_the_job_event_and_reads_nothing(
        settings, cluster) -> None:
    race = Race(settings, cluster)
    stored = race.store_job_and_its_pod()
    assert race.writer.flush(0.3) is False  # the pod's PodGroup waits for the Job ...
    assert race.counting.calls == []  # ... and has read nothing
    race.deliver_jobs()  # the Job's event, late
    race.now[0] += 0.1
    assert race.writer.flush(10)
    race.writer.close()
    assert race.counting.calls == ["create podgroups"]  # one PodGroup, no Job read
    made = cluster.get(PODGROUPS, "train", "default")
    assert made["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert made["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]


def test_a_job_that_never_reaches_the_informer_is_read_once_the_wait_is_over(
        settings, cluster) -> None:
    race = Race(settings, cluster)
    stored = race.store_job_and_its_pod()
    assert race.writer.flush(0.3) is False
    race.now[0] += JOB_WAIT / 2
    assert race.writer.flush(0.3) is False  # still waiting, half way
    assert race.counting.calls == []
    race.now[0] += JOB_WAIT
    assert race.writer.flush(10)
    race.writer.close()
    assert race.counting.calls == ["get jobs", "create podgroups"]
    made = cluster.get(PODGROUPS, "train", "default")
    assert made["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert made["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]
    assert race.writer.failed == 0



def test_a_jobs_pod_naming_its_group_is_admitted_without_reading_its_unseen_job(
        settings, cluster) -> None:
    """Sent to the webhook (a configuration without the handlers' matchConditions), a pod its
    Job's admission named the group for gets the answer its condition gives: no Job read."""
    counting = Counting(cluster)
    service = AdmissionService(settings, [GangHandler()], cluster=counting,
                               watched=watched_for(cluster))
    for each in service.watched.informers():
        each.sync()  # synced before the Job exists: it has not seen it
    its_pod = pod("train-0", group="train", index=0, schedulingGroup={"podGroupName": "train"})
    its_pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-1",
         "controller": True}]
    response, patched = admit(service, its_pod, store=False)  # admission alone
    assert response["allowed"] is True and patched == its_pod
    assert counting.calls == []
