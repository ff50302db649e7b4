"""PodGroups lost with a killed webhook's queue are found on the pods and made again."""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any

import pytest
from webhook_helpers import admit, pod, shared

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.hybrid.split import QuantumSplitHandler
from fluence_core.webhook.controller.repair import PodGroupRepair, repair_for
from fluence_core.webhook.admission.review import AdmissionService
from fluence_core.webhook.controller.writer import Write


class Counting:
    """The cluster boundary, counting lists and PodGroup creates; creates fail as scripted."""

    def __init__(self, inner: FakeCluster, failures: list[ApiError] | None = None) -> None:
        self.inner = inner
        self.failures = list(failures or [])
        self.lists: list[tuple[str, dict[str, Any]]] = []
        self.creates = 0

    def __getattr__(self, verb: str) -> Any:
        return getattr(self.inner, verb)

    def list(self, resource: Any, namespace: str | None = None, **selectors: Any) -> Any:
        self.lists.append((getattr(resource, "plural", resource), selectors))
        return self.inner.list(resource, namespace, **selectors)

    def create(self, resource: Any, body: Any, namespace: str | None = None) -> Any:
        if getattr(resource, "plural", resource) == "podgroups":
            self.creates += 1
            if self.failures:
                raise self.failures.pop(0)
        return self.inner.create(resource, body, namespace)


def handlers(settings) -> list[Any]:
    return [QuantumSplitHandler(settings), GangHandler()]


def stamped(settings, cluster, obj: dict[str, Any], *, node: str | None = None) -> None:
    """Store ``obj`` as the webhook would have admitted it, its PodGroup lost (the write of a
    killed webhook never ran: a dry run's answer is the same patch with nothing made)."""
    namespace = obj["metadata"]["namespace"]
    if cluster.get("namespaces", namespace) is None:
        cluster.create("namespaces", {"metadata": {"name": namespace}})
    gone = AdmissionService(settings, handlers(settings), cluster=cluster)
    response, out = admit(gone, obj, dry_run=True, namespace=namespace)
    assert response["allowed"] and out["spec"]["schedulingGroup"]
    if node is not None:
        out["spec"]["nodeName"] = node
    cluster.create("pods", out, out["metadata"]["namespace"])


def make_repair(settings, cluster, writer) -> PodGroupRepair:
    service = AdmissionService(settings, handlers(settings), cluster=cluster, writer=writer)
    return PodGroupRepair(service, writer, cluster, interval=60)


def gang(size: int = 3, group: str = "g", namespace: str = "default") -> list[dict[str, Any]]:
    return [pod(f"{group}-{i}", group=group, namespace=namespace,
                annotations={names.GROUP_SIZE_ANNOTATION: str(size)}) for i in range(size)]


def test_a_group_with_pods_and_no_podgroup_gets_one_logged_as_a_repair(
        settings, cluster, writer, caplog):
    for member in gang(3, namespace="team-a"):
        stamped(settings, cluster, member)
    repair = make_repair(settings, cluster, writer)
    with caplog.at_level(logging.WARNING, logger="fluence"):
        assert repair.run_once() == [("team-a", "g")]
        assert writer.flush(timeout=10)
    made = cluster.get("podgroups", "g", "team-a")
    assert made["spec"]["schedulingPolicy"]["gang"] == {"minCount": 3}
    assert made["metadata"]["labels"][names.MANAGED_BY_LABEL] == names.SCHEDULER_NAME
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "PodGroup team-a/g of group g in namespace team-a is missing" in record.getMessage()
    assert repair.run_once() == [], "made: the next pass finds nothing missing"


def test_the_podgroups_rebuilt_are_the_ones_admission_makes(settings, cluster, writer):
    """A shared quantum Job's scout and workers (minCount from the Job's parallelism)."""
    members = [shared(f"qj-{i}", i) for i in range(4)]
    admitted = FakeCluster()
    admitted.create("jobs", cluster.get("jobs", "qj", "default"), "default")
    inline = AdmissionService(settings, handlers(settings), cluster=admitted)
    for member in members:
        admit(inline, copy.deepcopy(member))
        stamped(settings, cluster, member)
    assert sorted(make_repair(settings, cluster, writer).run_once()) == [
        ("default", "qj"), ("default", "qj-scout")]
    assert writer.flush(timeout=10)
    for name in ("qj", "qj-scout"):
        assert (cluster.get("podgroups", name, "default")["spec"]
                == admitted.get("podgroups", name, "default")["spec"])
    assert cluster.get("podgroups", "qj", "default")["spec"]["schedulingPolicy"]["gang"] == {
        "minCount": 3}


def test_a_group_with_its_podgroup_is_untouched_and_costs_two_lists(
        settings, cluster, writer, caplog):
    for member in gang(2):
        stamped(settings, cluster, member)
    cluster.create("podgroups", {"metadata": {"name": "g", "namespace": "default"},
                                 "spec": {"schedulingPolicy": {"gang": {"minCount": 7}}}},
                   "default")
    counting = Counting(cluster)
    with caplog.at_level(logging.WARNING, logger="fluence"):
        assert make_repair(settings, counting, writer).run_once() == []
    assert counting.creates == 0 and writer.pending() == 0 and not caplog.records
    assert cluster.get("podgroups", "g", "default")["spec"]["schedulingPolicy"]["gang"] == {
        "minCount": 7}
    assert counting.lists == [
        ("pods", {"label_selector": names.GROUP_LABEL, "field_selector": "spec.nodeName="}),
        ("podgroups", {})]


def test_bound_pods_are_ignored_with_one_list(settings, cluster, writer):
    for member in gang(2):
        stamped(settings, cluster, member, node="n1")
    counting = Counting(cluster)
    assert make_repair(settings, counting, writer).run_once() == []
    assert [plural for plural, _ in counting.lists] == ["pods"]
    assert counting.creates == 0 and cluster.get("podgroups", "g", "default") is None


def test_a_pod_left_on_another_podgroup_and_a_terminating_one_are_ignored(
        settings, cluster, writer):
    theirs = pod("j-0", group="j")
    theirs["spec"]["schedulingGroup"] = {"podGroupName": "job-controllers-group"}
    stamped(settings, cluster, theirs)
    leaving = pod("h-0", group="h")
    stamped(settings, cluster, leaving)
    cluster.patch("pods", "h-0", {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}},
                  "default")
    if not cluster.get("pods", "h-0", "default")["metadata"].get("deletionTimestamp"):
        pytest.skip("the fake cluster does not keep a patched deletionTimestamp")
    assert make_repair(settings, cluster, writer).run_once() == []


def test_a_failing_create_is_retried_by_the_writer_and_logged(settings, cluster, writer,
                                                              sleeps, caplog):
    for member in gang(2):
        stamped(settings, cluster, member)
    flaky = Counting(cluster, [ApiError(503, "etcd leader changed", "ServiceUnavailable"),
                               ApiError(403, "podgroups is forbidden", "Forbidden")])
    repair = make_repair(settings, flaky, writer)
    with caplog.at_level(logging.INFO, logger="fluence"):
        assert repair.run_once() == [("default", "g")]
        assert writer.flush(timeout=10)
    assert flaky.creates == 2 and sleeps == [0.2], "the 503 retried, the 403 given up"
    assert cluster.get("podgroups", "g", "default") is None and writer.failed == 1
    retried = ("PodGroup default/g of pod default/g-0 failed (503 ServiceUnavailable:"
               " etcd leader changed")
    assert any(retried in r.getMessage()
               for r in caplog.records if r.levelno == logging.INFO)
    assert any("PodGroup default/g of pod default/g-0 failed for good" in r.getMessage()
               for r in caplog.records if r.levelno == logging.ERROR)
    assert repair.run_once() == [("default", "g")], "the next pass tries again"
    assert writer.flush(timeout=10) and cluster.get("podgroups", "g", "default") is not None


def test_a_podgroup_the_admission_path_is_writing_is_left_to_it(settings, cluster, writer,
                                                                 caplog):
    stamped(settings, cluster, pod("g-0", group="g"))
    started, release = threading.Event(), threading.Event()

    def admission_write() -> None:
        started.set()
        release.wait(10)

    assert writer.submit(Write(("podgroups", "default", "g"), "PodGroup default/g",
                               admission_write))
    assert started.wait(10)
    try:
        with caplog.at_level(logging.WARNING, logger="fluence"):
            assert make_repair(settings, cluster, writer).run_once() == []
        assert not caplog.records
    finally:
        release.set()


def test_the_repair_runs_at_start_then_stops(settings, cluster, writer):
    stamped(settings, cluster, pod("g-0", group="g"))
    service = AdmissionService(settings, handlers(settings), cluster=cluster, writer=writer)
    repair = repair_for(service)
    assert repair is not None and repair.interval == settings.webhook.repair_interval == 60
    repair.start()
    try:
        assert wait_for(lambda: cluster.get("podgroups", "g", "default") is not None)
    finally:
        repair.stop()
    assert repair.repaired == 1


def test_no_repair_without_a_writer_or_with_interval_zero(settings, cluster, writer):
    off = settings.replaced(webhook_repair_interval=0)
    assert repair_for(AdmissionService(off, [], cluster=cluster, writer=writer)) is None
    assert repair_for(AdmissionService(settings, [], cluster=cluster)) is None


def wait_for(check: Any, timeout: float = 10) -> bool:
    done = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if check():
            return True
        done.wait(0.02)
    return False
