"""The review step: which requests are judged, handler order, refusals, malformed input."""

from __future__ import annotations

import json

import pytest
from webhook_helpers import admit, pod, review, shared

from fluence_core import names
from fluence_core.errors import FluenceError
from fluence_core.plugins import get_plugin_manager
from fluence_core.webhook import build_service, select_handlers
from fluence_core.webhook.admission.base import Handler
from fluence_core.webhook.admission.review import AdmissionService


class Tagger(Handler):
    """Appends its name to an annotation list, to observe order and the pod each one sees."""

    def __init__(self, name: str, order: int = 100) -> None:
        self.name, self.order = name, order

    def applies(self, pod):
        return True

    def mutate(self, pod, ctx):
        seen = pod["metadata"]["annotations"].get("seen", "")
        return [{"op": "add", "path": "/metadata/annotations/seen", "value": seen + self.name}]


class Exploding(Handler):
    name = "boom"

    def applies(self, pod):
        return True

    def mutate(self, pod, ctx):
        raise RuntimeError("kaput")


def test_handlers_run_in_their_default_order_each_seeing_the_previous_patch(settings):
    service = AdmissionService(
        settings, select_handlers([Tagger("b", 2), Tagger("a", 1), Tagger("c", 3)])
    )
    _, out = admit(service, pod("p"))
    assert out["metadata"]["annotations"]["seen"] == "abc"


def test_settings_choose_and_order_the_handlers(settings):
    chosen = select_handlers([Tagger("a", 1), Tagger("b", 2), Tagger("c", 3)], ["c", "a"])
    _, out = admit(AdmissionService(settings, chosen), pod("p"))
    assert out["metadata"]["annotations"]["seen"] == "ca"


def test_an_unknown_handler_in_the_settings_fails_at_start():
    with pytest.raises(FluenceError, match="unknown handlers \\['nope'\\]"):
        select_handlers([Tagger("a")], ["a", "nope"])


def test_the_builtins_arrive_through_the_plugin_hook_in_default_order(settings, cluster):
    service = build_service(settings, get_plugin_manager(settings), cluster)
    builtin = [h.name for h in service.handlers if h.name in ("quantum", "gang", "fluxion-env")]
    assert builtin == ["quantum", "gang", "fluxion-env"]


def test_a_handler_that_raises_denies_the_pod_naming_the_handler(settings):
    service = AdmissionService(settings, [Tagger("a"), Exploding()])
    response, _ = admit(service, pod("p"))
    assert response["allowed"] is False
    assert "handler boom failed" in response["status"]["message"]
    assert "kaput" in response["status"]["message"]


def test_admission_control_refusal_is_the_denial_message(settings, cluster):
    service = AdmissionService(settings, [Tagger("a")], cluster=cluster,
                               admit=lambda pod, ctx: "no room for you")
    response, _ = admit(service, pod("p"))
    assert response == {
        "uid": "req-1",
        "allowed": False,
        "status": {"code": 403, "message": "no room for you", "reason": "Forbidden"},
    }


@pytest.mark.parametrize("kwargs, obj", [
    ({"operation": "UPDATE"}, pod("p")),
    ({"namespace": names.KUBE_SYSTEM}, pod("p", namespace=names.KUBE_SYSTEM)),
    ({}, pod("p", scheduler="default-scheduler")),
    ({"resource": "services"}, {"kind": "Service", "spec": {}}),
])
def test_requests_fluence_does_not_judge_are_allowed_untouched(settings, kwargs, obj):
    service = AdmissionService(settings, [Tagger("a")])
    response, _ = admit(service, obj, **kwargs)
    assert response == {"uid": "req-1", "allowed": True}


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b"{}",
        b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}',
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}',
        b"\xff\xfe\x00",
        b"[" * 100000,
    ],
)
def test_malformed_bodies_get_an_admission_review_with_an_error(settings, body):
    outcome = AdmissionService(settings, [Tagger("a")]).review(body)
    assert outcome.status == 400
    assert outcome.body["kind"] == "AdmissionReview"
    assert outcome.response["allowed"] is False and outcome.response["status"]["message"]


@pytest.mark.parametrize(
    "obj",
    [
        None,
        "pod",
        {"kind": "Pod"},
        {"kind": "Pod", "spec": []},
        {"kind": "Pod", "metadata": "x", "spec": {"schedulerName": "fluence"}},
    ],
)
def test_a_pod_request_without_a_usable_pod_is_denied_with_its_uid(settings, obj):
    outcome = AdmissionService(settings, [Tagger("a")]).review(json.dumps(review(obj)).encode())
    assert outcome.response["uid"] == "req-1" and outcome.response["allowed"] is False


class JobTagger(Tagger):
    """A handler of Jobs only (``resources``), tagging what it sees."""

    resources = ("batch/jobs",)


def job_review(obj, **kw):
    body = review(obj, **kw)
    body["request"]["resource"] = {"group": "batch", "version": "v1", "resource": "jobs"}
    return json.dumps(body).encode()


def test_a_handler_declaring_jobs_is_sent_jobs_and_pod_handlers_are_not(settings):
    service = AdmissionService(settings, [Tagger("pod"), JobTagger("job")])
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {}},
           "spec": {"template": {"spec": {"containers": []}}}}
    response = service.review(job_review(obj)).response
    _, out = admit(service, pod("p"))
    assert response["allowed"] is True
    patch = json.loads(__import__("base64").b64decode(response["patch"]))
    assert patch == [{"op": "add", "path": "/metadata/annotations/seen", "value": "job"}]
    assert out["metadata"]["annotations"]["seen"] == "pod"  # the Job handler never sees pods


def test_a_kind_no_handler_declares_is_allowed_untouched(settings):
    service = AdmissionService(settings, [Tagger("pod")])
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}
    assert service.review(job_review(obj)).response == {"uid": "req-1", "allowed": True}


def test_an_object_request_without_an_object_is_denied(settings):
    service = AdmissionService(settings, [JobTagger("job")])
    assert service.review(job_review(None)).response["allowed"] is False


def test_a_handler_inherits_the_optional_members_from_the_protocol():
    handler = Tagger("a")
    assert handler.resources == ("pods",) and list(handler.env_contract()) == []
    assert Exploding().order == 100


def test_an_object_that_is_not_a_handler_is_refused_naming_what_it_lacks():
    class Loose:
        name = "loose"

        def applies(self, pod):
            return True

        def mutate(self, pod, ctx):
            return []

    with pytest.raises(
        FluenceError,
        match=r"loose.*is not a Handler: it has no \['order', 'resources', "
        r"'match_condition', 'env_contract'\]",
    ):
        select_handlers([Loose()])


# -- every built-in handler, admitted twice --------------------------------------


def test_every_pod_comes_back_unchanged_when_reinvoked(service, cluster):
    cluster.create(
        "priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": names.QUANTUM_PRIORITY_CLASS},
            "value": 10,
        },
    )
    for obj in (shared("qj-0", 0), shared("qj-3", 3), pod("g", group="g"), pod("q", qpu=1)):
        _, once = admit(service, obj)
        response, twice = admit(service, once)
        assert "patch" not in response, obj["metadata"]["name"]
        assert twice == once
