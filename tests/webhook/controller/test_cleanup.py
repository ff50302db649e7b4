"""The PodGroups of bare pods' gangs are deleted once no live pod points at them and they are
older than the grace; what a Job owns is left to the garbage collector."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from webhook_helpers import Counting, admit, pod

from fluence_core import names
from fluence_core.kube.api import PODGROUPS
from fluence_core.kube.fake import FakeCluster
from fluence_core.webhook import BackgroundWriter
from fluence_core.webhook.controller.cleanup import PodGroupCleanup, age, cleanup_for
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.controller.pod_groups import pod_group_body
from fluence_core.webhook.admission.review import AdmissionService

GRACE = 120.0


class Now:
    """Wall time the fake cluster stamps objects with and the cleanup reads."""

    def __init__(self) -> None:
        self.moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, seconds: float) -> None:
        self.moment += timedelta(seconds=seconds)


@pytest.fixture
def now() -> Now:
    return Now()


@pytest.fixture
def fake(now) -> FakeCluster:
    return FakeCluster(now=now)


def cleanup(cluster: Any, now: Now, **kw: Any) -> PodGroupCleanup:
    return PodGroupCleanup(cluster, 60.0, GRACE, now=now, **kw)


def gang(fake: FakeCluster, name: str, size: int = 2, *, owner: dict | None = None) -> list[str]:
    """A PodGroup Fluence made and its member pods, stored and pointing at it."""
    fake.create(PODGROUPS, pod_group_body(name, "default", size, owner), "default")
    members = []
    for i in range(size):
        member = pod(f"{name}-{i}", group=name, schedulingGroup={"podGroupName": name})
        members.append(fake.create("pods", member, "default")["metadata"]["name"])
    return members


def phase(fake: FakeCluster, name: str, value: str) -> None:
    fake.patch_status("pods", name, {"status": {"phase": value}}, "default")


def test_a_finished_gangs_podgroup_is_deleted_once_older_than_the_grace(fake, now):
    for member in gang(fake, "g"):
        phase(fake, member, "Succeeded")
    sweep = cleanup(fake, now)
    now.advance(GRACE - 1)
    assert sweep.sweep() == []  # young: its pods may still be on their way
    now.advance(2)
    assert sweep.sweep() == [("default", "g")]
    assert fake.get(PODGROUPS, "g", "default") is None


def test_a_deleted_or_failed_gangs_podgroup_is_deleted(fake, now):
    members = gang(fake, "g")
    phase(fake, members[0], "Failed")
    fake.delete("pods", members[1], "default")
    now.advance(GRACE + 1)
    assert cleanup(fake, now).sweep() == [("default", "g")]


def test_a_podgroup_a_live_pod_points_at_is_kept(fake, now):
    members = gang(fake, "g")
    phase(fake, members[0], "Succeeded")  # the other one still runs
    phase(fake, members[1], "Running")
    now.advance(GRACE + 1)
    assert cleanup(fake, now).sweep() == []
    assert fake.get(PODGROUPS, "g", "default") is not None


def test_a_podgroup_a_job_owns_is_left_to_the_garbage_collector(fake, now):
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid"}
    for member in gang(fake, "j", owner=owner):
        fake.delete("pods", member, "default")
    now.advance(GRACE + 1)
    counting = Counting(fake)
    assert cleanup(counting, now).sweep() == []
    assert counting.calls == ["list podgroups"]  # no candidate: no pod list


def test_only_fluences_podgroups_are_looked_at(fake, now):
    theirs = pod_group_body("theirs", "default", 2)
    del theirs["metadata"]["labels"]
    fake.create(PODGROUPS, theirs, "default")
    now.advance(GRACE + 1)
    assert cleanup(fake, now).sweep() == []
    assert fake.get(PODGROUPS, "theirs", "default") is not None


def test_a_podgroup_this_webhook_is_making_is_kept(fake, now):
    gang(fake, "g")
    for member in ("g-0", "g-1"):
        fake.delete("pods", member, "default")
    now.advance(GRACE + 1)
    busy = {(PODGROUPS.plural, "default", "g")}
    assert cleanup(fake, now, busy=busy.__contains__).sweep() == []


def test_the_webhooks_cleanup_skips_what_its_requests_made_seconds_ago(settings, fake, now):
    settings = settings.replaced(webhook_podgroup_grace=0.0)
    writer = BackgroundWriter()
    service = AdmissionService(settings, [GangHandler()], cluster=fake, writer=writer)
    admit(service, pod("g-0", group="g", annotations={names.GROUP_SIZE_ANNOTATION: "1"}))
    assert writer.flush(10)
    sweep = cleanup_for(service)
    assert sweep is not None
    sweep.now = now
    assert sweep.sweep() == []  # no pod stored yet, but this webhook made it a moment ago
    writer.close()


def test_no_cleanup_without_a_cluster_or_with_interval_zero(settings, fake):
    off = settings.replaced(webhook_podgroup_cleanup=0.0)
    assert cleanup_for(AdmissionService(off, [], cluster=fake)) is None
    assert cleanup_for(AdmissionService(settings, [])) is None


def test_age_reads_the_creation_timestamp_and_nothing_else(now):
    stamped = {"metadata": {"creationTimestamp": "2026-11-30T11:59:00Z"}}
    assert age(stamped, now()) == 60.0
    assert age({"metadata": {}}, now()) is None
    assert age({"metadata": {"creationTimestamp": "yesterday"}}, now()) is None
