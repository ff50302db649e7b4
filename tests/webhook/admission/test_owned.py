"""Fluence's annotations are Fluence's: the webhook strips what only Fluence writes (issue 32)."""

from __future__ import annotations

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import Settings
from fluence_core.webhook.admission import owned
from fluence_core.webhook.admission.review import AdmissionService
from tests.webhook.test_cel import matches
from tests.webhook.webhook_helpers import admit, pod, shared

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
    assert owned.only_fluence_may_set(names.PROTECTED_ANNOTATION)


SEAL = names.SPLIT_SEAL_ANNOTATION


def _worker(service: AdmissionService) -> dict:
    """Worker qj-1 of the shared Job qj, as the split leaves it."""
    response, out = admit(service, shared("qj-1", 1), store=False)
    assert response["allowed"] is True
    return out


def test_the_split_seals_the_scout_and_the_workers(service: AdmissionService) -> None:
    scout = admit(service, shared("qj-0", 0), store=False)[1]
    assert owned.sealer_of(service.state).holds(scout, "default")
    assert owned.sealer_of(service.state).holds(_worker(service), "default")


def test_a_seal_the_webhook_did_not_make_is_removed(service: AdmissionService) -> None:
    claimed = pod("p", group="g", annotations={SEAL: "0" * 64},
                  labels={names.ROLE_LABEL: names.ROLE_WORKER})
    response, out = admit(service, claimed, store=False)
    assert response["allowed"] is True
    assert SEAL not in out["metadata"]["annotations"]


def test_a_second_call_for_the_same_pod_keeps_its_seal(service: AdmissionService) -> None:
    worker = _worker(service)  # a later webhook changed it: the API server calls again
    worker["metadata"]["labels"]["mesh"] = "injected"
    response, again = admit(service, worker, store=False)
    assert response["allowed"] is True
    assert again["metadata"]["annotations"][SEAL] == worker["metadata"]["annotations"][SEAL]


def test_a_seal_copied_onto_another_pod_is_removed(service: AdmissionService) -> None:
    worker = _worker(service)
    copied = pod("qj-9", group="qj", job="qj", index=1,
                 labels={names.ROLE_LABEL: names.ROLE_WORKER},
                 annotations={SEAL: worker["metadata"]["annotations"][SEAL]})
    assert SEAL not in admit(service, copied, store=False)[1]["metadata"]["annotations"]


def test_another_webhook_process_does_not_take_the_seal(
        service: AdmissionService, settings: Settings, cluster: FakeCluster) -> None:
    worker = _worker(service)
    assert SEAL in worker["metadata"]["annotations"]
    restarted = AdmissionService(settings, service.handlers, cluster=cluster)
    assert SEAL not in admit(restarted, worker, store=False)[1]["metadata"]["annotations"]


def test_a_pod_carrying_a_seal_is_always_sent_to_the_webhook(
        service: AdmissionService) -> None:
    assert matches(service.match_conditions, pod("p", annotations={SEAL: "x"}))
