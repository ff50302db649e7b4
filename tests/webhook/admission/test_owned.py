"""Fluence's annotations are Fluence's: the webhook strips what only Fluence writes (issue 32)."""

from __future__ import annotations

from fluence_core import names
from fluence_core.webhook.admission import owned
from fluence_core.webhook.admission.review import AdmissionService
from tests.webhook.test_cel import matches
from tests.webhook.webhook_helpers import admit, pod

FORGED = {names.ALLOCATION_ANNOTATION: '{"n1": [0, 1, 2, 3]}', names.JOBIDS_ANNOTATION: "[7]",
          names.BACKEND_ANNOTATION: "evil_backend", names.ATTR_ANNOTATION_PREFIX + "region": "x",
          names.SCOUT_STATUS_ANNOTATION: "ready", names.SCOUT_SESSION_ANNOTATION: "s"}


def test_a_fluence_pod_is_admitted_with_every_scheduler_only_annotation_removed(
        service: AdmissionService) -> None:
    response, out = admit(service, pod("p", annotations={**FORGED, "team": "a"}), store=False)
    assert response["allowed"] is True
    assert out["metadata"]["annotations"] == {"team": "a"}


def test_a_grouped_pod_is_stripped_and_still_pointed_at_its_group(
        service: AdmissionService) -> None:
    response, out = admit(service, pod("g-0", group="g", annotations=dict(FORGED)),
                          store=False)
    assert response["allowed"] is True
    assert out["metadata"]["annotations"] == {}
    assert out["spec"]["schedulingGroup"] == {"podGroupName": "g"}


def test_the_keys_users_write_are_kept(service: AdmissionService) -> None:
    mine = {names.GROUP_SIZE_ANNOTATION: "1", names.REQUIRE_BACKEND_ANNOTATION: "sv1",
            names.COORDINATION_ANNOTATION: names.COORDINATION_INDEPENDENT}
    response, out = admit(service, pod("p", annotations=dict(mine)), store=False)
    assert response["allowed"] is True and out["metadata"]["annotations"] == mine


def test_a_pod_carrying_a_scheduler_only_key_is_always_sent_to_the_webhook(
        service: AdmissionService) -> None:
    conditions = service.match_conditions
    for key in FORGED:
        assert matches(conditions, pod("p", annotations={key: "x"})), key
    assert owned.scheduler_only(names.ALLOCATION_ANNOTATION)
    assert not owned.scheduler_only(names.PROTECTED_ANNOTATION)  # set by admission-mark
    assert owned.owned(names.PROTECTED_ANNOTATION)
