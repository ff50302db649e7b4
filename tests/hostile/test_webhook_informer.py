"""Hostile input to the webhook's informers (issue 20): an object of an unexpected shape, a
bad edit of a good one, a slow API server. None stops the informer or blocks a lookup; what
it cannot read is looked up as unknown, so admission reads it from the API server as it did
before the informers."""

from __future__ import annotations

import threading
from typing import Any, Iterator

import pytest

from fluence_core import names
from fluence_core.kube.api import ObjectList
from fluence_core.webhook.controller.informer import Informer, slim_job, slim_pod_group
from fluence_core.webhook.controller.pod_groups import pod_group_body

pytestmark = pytest.mark.usefixtures("clean_env")

GOOD = pod_group_body("good", "ns", 2)


class Listing:
    """The cluster boundary serving one fixed list (after ``release`` when given) and an
    empty watch."""

    def __init__(self, items: list[Any], release: threading.Event | None = None) -> None:
        self.items = items
        self.release = release

    def list(self, *args: Any, **kwargs: Any) -> ObjectList:
        if self.release is not None:
            assert self.release.wait(10)
        return ObjectList(items=list(self.items), resource_version="7")

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return iter(())


def pod_group(**fields: Any) -> dict[str, Any]:
    return {**pod_group_body("bad", "ns", 2), **fields}


def job(template: Any) -> dict[str, Any]:
    return {"metadata": {"name": "bad", "namespace": "ns", "uid": "u"},
            "spec": {"template": template}}


NAMED = [  # unreadable, but named: looked up as unknown
    ("podgroup-spec-a-list", slim_pod_group, pod_group(spec=["gang"])),
    ("podgroup-spec-a-string", slim_pod_group, pod_group(spec="gang")),
    ("job-template-a-list", slim_job, job(["pod"])),
    ("job-template-labels-a-string", slim_job, job({"metadata": {"labels": "group=g"}})),
    ("job-template-metadata-a-number", slim_job, job({"metadata": 7})),
]
NAMELESS = [  # no name to attach it to: skipped
    ("metadata-a-string", {"metadata": "bad", "spec": {}}),
    ("metadata-a-list", {"metadata": ["bad"]}),
    ("object-a-string", "podgroup"),
    ("object-a-number", 7),
]


@pytest.mark.parametrize("case, keep, bad", NAMED, ids=[c[0] for c in NAMED])
def test_a_listed_object_it_cannot_read_is_unknown_and_the_rest_known(
        case: str, keep: Any, bad: Any, caplog: pytest.LogCaptureFixture) -> None:
    good = GOOD if keep is slim_pod_group else job({"metadata": {"labels": {
        names.GROUP_LABEL: "g"}}}) | {"metadata": {"name": "good", "namespace": "ns"}}
    informer = Informer(Listing([bad, good]), "podgroups", keep)  # type: ignore[arg-type]
    informer.sync()
    assert informer.synced
    assert informer.lookup("ns", "bad") == (False, None)  # unknown: admission reads it
    assert informer.lookup("ns", "good")[1] is not None
    assert informer.lookup("ns", "other") == (True, None)
    assert "informer cannot read an object" in caplog.text


@pytest.mark.parametrize("case, bad", NAMELESS, ids=[c[0] for c in NAMELESS])
def test_an_object_with_no_name_is_skipped_from_a_list_and_a_watch(
        case: str, bad: Any, caplog: pytest.LogCaptureFixture) -> None:
    informer = Informer(Listing([bad, GOOD]), "podgroups", slim_pod_group)  # type: ignore[arg-type]
    informer.sync()
    for event in ("ADDED", "MODIFIED", "DELETED"):
        informer.apply(event, bad)
    assert informer.synced and len(informer) == 1
    assert informer.lookup("ns", "good")[1] is not None
    assert "informer cannot read an object" in caplog.text


def test_a_bad_edit_makes_the_object_unknown_until_a_good_one() -> None:
    informer = Informer(Listing([GOOD]), "podgroups", slim_pod_group)  # type: ignore[arg-type]
    informer.sync()
    informer.apply("MODIFIED", {**GOOD, "spec": "edited badly"})
    assert informer.lookup("ns", "good") == (False, None)  # not the stale copy
    informer.apply("MODIFIED", GOOD)
    assert informer.lookup("ns", "good")[1]["spec"] == GOOD["spec"]
    informer.apply("MODIFIED", {**GOOD, "spec": ["again"]})
    informer.apply("DELETED", {**GOOD, "spec": ["again"]})  # deleted while unreadable
    assert informer.lookup("ns", "good") == (True, None)


def test_a_slow_api_server_never_blocks_a_lookup() -> None:
    release = threading.Event()
    informer = Informer(Listing([GOOD], release), "podgroups",  # type: ignore[arg-type]
                        slim_pod_group)
    informer.start()
    try:
        for _ in range(100):  # while the first list hangs: unknown at once, callers read
            assert informer.lookup("ns", "good") == (False, None)
        release.set()
        assert informer.wait_synced(10)
        assert informer.lookup("ns", "good")[1] is not None
    finally:
        release.set()
        informer.stop()


@pytest.mark.parametrize("labels", [7, ["team"], "team=a", None])
def test_a_job_whose_labels_are_no_object_still_gets_an_answer_and_its_label(
        labels: Any) -> None:
    """The API server decodes a Job before admission, so only a hand-made review carries
    such labels; the job-group handler answers it all the same and the next Job is served."""
    from fluence_core.kube.fake import FakeCluster
    from fluence_core.settings import load_settings
    from fluence_core.webhook.admission.handlers.job_group import JobGroupHandler
    from fluence_core.webhook.admission.review import AdmissionService
    from tests.webhook.admission.handlers.test_job_group import _review_job
    from tests.webhook.admission.handlers.test_job_group import job as grouped_job

    service = AdmissionService(load_settings(), [JobGroupHandler()], cluster=FakeCluster())
    odd = grouped_job()
    odd["metadata"]["labels"] = labels
    response, patched = _review_job(service, odd, dry_run=True)
    assert response["allowed"] is True
    assert patched["metadata"]["labels"] == {names.GROUP_LABEL: "train"}
    assert _review_job(service, grouped_job(), dry_run=True)[0]["allowed"] is True
