"""The pod webhook's matchConditions: built from what each handler declares, and sound.

Sound means: a pod the conditions let the API server skip is one the whole
review would have allowed unchanged, with no refusal, no warning and no call
to the cluster. The conditions are evaluated here with cel-python, a CEL
implementation independent of ours; the e2e test
(``tests/e2e/test_match_conditions_e2e.py``) checks the same against a real API
server's CEL.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Mapping, Sequence

import celpy
import pytest
from hypothesis import event, given, settings as hyp_settings, strategies as st
from webhook_helpers import QPU, Counting, admit, pod

from fluence_core import names
from fluence_core.errors import FluenceError
from fluence_core.kube.fake import FakeCluster
from fluence_core.limits import MAX_GROUP_SIZE
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.settings import Settings, load_settings
from fluence_core.webhook import build_service
from fluence_core.webhook.admission.base import AdmissionContext, AdmissionDenied, Handler
from fluence_core.webhook.cel import (
    NEEDS_CONDITION,
    SCHEDULER_CONDITION,
    Need,
    judged_by,
    judges,
    pod_match_conditions,
    skipping,
)
from fluence_core.webhook.admission.review import AdmissionService

_ENV = celpy.Environment()


@functools.cache
def _program(expression: str) -> celpy.Runner:
    """A condition compiled once: compiling one costs tens of milliseconds, evaluating it
    next to nothing, and the generated tests below evaluate the same few thousands of times.
    (A compiled program keeps no state between evaluations: each builds its own evaluator.)"""
    return _ENV.program(_ENV.compile(expression))


def matches(conditions: Sequence[Mapping[str, str]], obj: Mapping[str, Any]) -> bool:
    """Whether the API server would call the webhook: every condition true (an error fails
    the test: under failurePolicy Fail it would refuse the pod)."""
    activation = {"object": celpy.json_to_cel(obj)}
    for condition in conditions:
        result = _program(condition["expression"]).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), (condition["name"], result)
        if not result:
            return False
    return True


# -- the builder -----------------------------------------------------------------------------


def test_the_scheduler_condition_comes_first_and_the_needs_are_joined_into_one() -> None:
    built = pod_match_conditions([Need("a", "object.x == 1"), Need("b", "object.y == 2")])
    assert [c["name"] for c in built] == [SCHEDULER_CONDITION, NEEDS_CONDITION]
    assert built[1]["expression"] == "(object.x == 1) ||\n(object.y == 2)"
    assert skipping(built)


def test_one_owner_needing_every_pod_leaves_only_the_scheduler_condition() -> None:
    built = pod_match_conditions([Need("a", "object.x == 1"), Need("third-party", None)])
    assert [c["name"] for c in built] == [SCHEDULER_CONDITION]
    assert not skipping(built)


def test_a_condition_that_is_not_an_expression_is_refused_naming_its_owner() -> None:
    with pytest.raises(FluenceError, match="handler odd's match_condition"):
        pod_match_conditions([Need("handler odd", "  ")])


def test_judges_marks_an_admit_implementation_and_refuses_an_empty_condition() -> None:
    @judges("object.x == 1")
    def admit(pod: Any, ctx: Any) -> None:
        return None

    assert judged_by(admit) == "object.x == 1"
    assert judged_by(lambda pod, ctx: None) is None
    with pytest.raises(FluenceError, match="must be a CEL expression"):
        judges("")


class Silent(Handler):
    """A third party's pod handler that declares nothing."""

    name = "silent"

    def applies(self, pod: Mapping[str, Any]) -> bool:
        return False

    def mutate(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> list[Any]:
        return []


def test_a_handler_without_a_condition_makes_the_webhook_see_every_fluence_pod(settings) -> None:
    assert not skipping(AdmissionService(settings, [Silent()]).match_conditions)


def test_an_admit_hook_without_a_declaration_makes_the_webhook_see_every_fluence_pod(
        settings) -> None:
    service = AdmissionService(settings, [], admit=lambda pod, ctx: None)
    assert not skipping(service.match_conditions)
    judged = AdmissionService(settings, [], admit=lambda pod, ctx: None,
                              admit_needs=[Need("x", "object.x == 1")])
    assert skipping(judged.match_conditions)


def test_every_installed_pod_handler_and_admit_hook_declares_a_condition(settings) -> None:
    service = build_service(settings, get_plugin_manager(settings), None)
    silent = [need.owner for need in service.needs() if need.condition is None]
    assert silent == []
    assert {"handler admission-mark", "fluence_admit of admission", "handler gang",
            "handler quantum", "handler fluxion-env"} <= {n.owner for n in service.needs()}
    assert skipping(service.match_conditions)


# -- which pods are sent ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def full() -> list[dict[str, str]]:
    settings = load_settings()
    return build_service(settings, get_plugin_manager(settings), None).match_conditions


def made_with_its_job(obj: Mapping[str, Any]) -> str | None:
    """The group of a pod its Job controls that points at its own group: its PodGroup was
    made at the Job's admission (``job-group``), so the gang handler's create of it, which
    the pod would otherwise ask for, is the one thing a skipped pod may miss."""
    group = (obj["metadata"].get("labels") or {}).get(names.GROUP_LABEL)
    target = (obj["spec"].get("schedulingGroup") or {}).get("podGroupName")
    controlled = any(ref.get("kind") == "Job" and ref.get("controller") is True
                     for ref in obj["metadata"].get("ownerReferences") or [])
    return group if group and controlled and target == group else None


def _job_pod(name: str, group: str, **kw: Any) -> dict[str, Any]:
    return pod(name, group=group, job=group, schedulingGroup={"podGroupName": group}, **kw)


SKIPPED = {
    "plain single": pod("plain"),
    "other scheduler with a forged mark": pod(
        "x", scheduler="default-scheduler", annotations={names.PROTECTED_ANNOTATION: "true"}),
    "a Job's stamped gang member": _job_pod("j-0", "train"),
    "a stamped member with a valid group-size": _job_pod(
        "j-1", "train", annotations={names.GROUP_SIZE_ANNOTATION: "0004"}),
    "a member of the job controller's group": pod(
        "c-0", group="train", schedulingGroup={"podGroupName": "theirs"}),
    "an empty group label": pod("e", group=None, labels={names.GROUP_LABEL: ""}),
    "an independent annotation": pod("i", annotations={names.COORDINATION_ANNOTATION:
                                                         names.COORDINATION_INDEPENDENT}),
}
SENT = {
    "grouped bare": pod("g", group="train"),
    "quantum": pod("q", qpu=1),
    "forged protected": pod("f", annotations={names.PROTECTED_ANNOTATION: "true"}),
    "forged promised": pod("f", annotations={names.PROMISED_CORES_ANNOTATION: "64"}),
    "bad group label": pod("b", group=None, labels={names.GROUP_LABEL: "Not_A_Name"}),
    "group label too long": pod("b", group="a" * 250),
    "bad coordination": pod("c", annotations={names.COORDINATION_ANNOTATION: "both"}),
    "stamped but bad group-size": _job_pod(
        "j", "train", annotations={names.GROUP_SIZE_ANNOTATION: "0"}),
    "stamped, group-size over the limit": _job_pod(
        "j", "train", annotations={names.GROUP_SIZE_ANNOTATION: str(MAX_GROUP_SIZE + 1)}),
    "stamped without a controlling Job": pod(
        "s", group="train", schedulingGroup={"podGroupName": "train"}),
    "forged worker role": pod("w", labels={names.ROLE_LABEL: names.ROLE_WORKER}),
}
SENT["quantum in limits only"] = pod("l", containers=[
    {"name": "app", "image": "app", "resources": {"limits": {QPU: "1"}}}])


@pytest.mark.parametrize("kind", sorted(SKIPPED))
def test_pods_nothing_needs_are_not_sent(full, kind) -> None:
    assert not matches(full, SKIPPED[kind])


@pytest.mark.parametrize("kind", sorted(SENT))
def test_pods_a_handler_or_check_needs_are_sent(full, kind) -> None:
    assert matches(full, SENT[kind])


# -- soundness: a skipped pod would have been allowed unchanged ------------------------------

_GROUPS = st.sampled_from([None, "train", "", "Bad_Group", "a" * 250, "qj"])
_MAYBE = st.one_of(st.none(), st.sampled_from(["", "true", "x", "0", "1", "4", "0004", "100001"]))


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    group = draw(_GROUPS)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if group is not None:
        labels[names.GROUP_LABEL] = group
    for key, values in (
        (names.COORDINATION_ANNOTATION, ["shared", "independent", "", "both"]),
        (names.PROTECTED_ANNOTATION, ["true", "false", ""]),
        (names.PROMISED_CORES_ANNOTATION, ["8", "x"]),
        (names.GROUP_SIZE_ANNOTATION, ["4", "0004", "0", "x", "", str(MAX_GROUP_SIZE + 1)]),
        (names.SIDECAR_CREDENTIALS_ANNOTATION, ["none", "bad name!"]),
    ):
        value = draw(st.one_of(st.none(), st.sampled_from(values)))
        if value is not None:
            annotations[key] = value
    role = draw(st.one_of(st.none(), st.sampled_from(["scout", "worker", "other", ""])))
    if role is not None:
        labels[names.ROLE_LABEL] = role
    index = draw(st.one_of(st.none(), st.sampled_from(["0", "1", "x"])))
    if index is not None:
        labels[names.JOB_COMPLETION_INDEX] = annotations[names.JOB_COMPLETION_INDEX] = index
    meta: dict[str, Any] = {"name": "p", "namespace": "default"}
    if labels or draw(st.booleans()):
        meta["labels"] = labels
    if annotations or draw(st.booleans()):
        meta["annotations"] = annotations
    owner = draw(st.sampled_from([None, True, False]))
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "qj",
                                    "uid": "job-uid", "controller": owner}]
    spec: dict[str, Any] = {"schedulerName": draw(st.sampled_from(
        [names.SCHEDULER_NAME, names.SCHEDULER_NAME, "default-scheduler"]))}
    target = draw(st.sampled_from([None, "same", "other", "scout"]))
    if target is not None:
        name = {"same": group or "", "other": "theirs", "scout": f"{group}-scout"}[target]
        spec["schedulingGroup"] = {"podGroupName": name}

    def container(name: str) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "image": "app"}
        resources: dict[str, Any] = {}
        for part in ("requests", "limits"):
            chosen = draw(st.sampled_from([None, "cpu", "qpu"]))
            if chosen == "cpu":
                resources[part] = {"cpu": "1"}
            elif chosen == "qpu":
                resources[part] = {QPU: "1", "cpu": "1"}
        if resources:
            body["resources"] = resources
        if draw(st.booleans()):
            body["env"] = [{"name": names.ENV_BACKEND, "value": "mine"}]
        return body

    spec["containers"] = [container(f"c{i}") for i in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        spec["initContainers"] = [container("init")]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


World = tuple[AdmissionService, Counting, list[dict[str, str]]]


@pytest.fixture(scope="module")
def installed() -> tuple[Settings, FluencePluginManager]:
    """The settings and every installed plugin: loaded once, since they hold no state of a
    review (what a service remembers lives in the service, built fresh by :func:`world`)."""
    settings = load_settings(runtime_image="example.org/fluence:test")
    return settings, get_plugin_manager(settings)


def world(installed: tuple[Settings, FluencePluginManager]) -> World:
    """Every installed handler and admission check, over a cluster that records its calls
    (with the Job the pods name, and nodes for admission control's budget).

    Each hypothesis example builds its own: a world shared across examples keeps what an
    earlier example left (a PodGroup of another size, the service's memory of it, whose
    entries expire after seconds), so an example's answer would depend on the ones run
    before it and on the clock, and hypothesis would call the test flaky."""
    settings, manager = installed
    fake = FakeCluster()
    fake.create("jobs", {"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": "qj", "namespace": "default", "uid": "job-uid"},
                         "spec": {"parallelism": 4, "completions": 4,
                                  "completionMode": "Indexed",
                                  "template": {"spec": {"containers": []}}}}, "default")
    counting = Counting(fake)
    service = build_service(settings, manager, counting)
    return service, counting, service.match_conditions


@hyp_settings(max_examples=400, deadline=None)
@given(candidate=pods())
def test_a_pod_the_conditions_skip_would_have_been_allowed_unchanged(installed,
                                                                     candidate) -> None:
    service, counting, conditions = world(installed)
    sent = matches(conditions, candidate)
    event("sent" if sent else "skipped")
    if sent:
        return
    counting.calls.clear()
    response, out = admit(service, copy.deepcopy(candidate), uid=f"u-{id(candidate)}",
                          store=False)
    assert response == {"uid": f"u-{id(candidate)}", "allowed": True}, response
    assert out == candidate
    group = made_with_its_job(candidate)
    if group is None:
        assert counting.calls == []
    else:  # the PodGroup its Job's admission made (and the read of the Job for its size)
        assert set(counting.calls) <= {"get jobs", "create podgroups"}, counting.calls


@hyp_settings(max_examples=300, deadline=None)
@given(candidate=pods())
def test_each_handler_leaves_alone_every_pod_its_condition_excludes(installed,
                                                                    candidate) -> None:
    service, _, _ = world(installed)
    for handler in service.handlers:
        condition = handler.match_condition
        if "pods" not in handler.resources or condition is None:
            continue
        if matches([{"name": handler.name, "expression": condition}], candidate):
            continue
        ctx = AdmissionContext(settings=service.settings, cluster=None, namespace="default")
        try:
            patch = handler.mutate(candidate, ctx) if handler.applies(candidate) else []
        except AdmissionDenied as refusal:
            pytest.fail(f"{handler.name} refuses a pod its condition excludes: {refusal}")
        assert patch == [], f"{handler.name} patches a pod its condition excludes"


@hyp_settings(max_examples=200, deadline=None)
@given(candidate=pods())
def test_an_admitted_pod_sent_again_gets_an_answer_without_a_patch_field(installed,
                                                                       candidate) -> None:
    """Every installed handler patches nothing once nothing needs changing (the API server's
    reinvocation): the answer then has no patch at all, so it costs no second pass."""
    service, _, _ = world(installed)
    response, once = admit(service, copy.deepcopy(candidate))
    event("allowed" if response["allowed"] else "refused")
    if not response["allowed"]:
        return
    again, twice = admit(service, once)
    assert again["allowed"] is True
    assert "patch" not in again and "patchType" not in again, again
    assert twice == once
