"""Admission control: the budget, the verdict, promises, the protected mark and the settings."""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest

from fluence_admission import plugin
from fluence_admission.control import PENDING_GRACE, AdmissionControl, MarkHandler
from fluence_admission.settings import AdmissionSettings
from fluence_core.api import AdmissionContext, SettingsError, Switch, load_settings, names
from fluence_core.testing import (
    AdmissionService, FakeCluster, build_service, get_plugin_manager, job_owner, make_node_dict,
    make_pod_dict,
)

QPU = names.extended_resource("qpu")


def node(name: str, cpu: int) -> dict:
    return make_node_dict(name, cpu, "16Gi", pods=None)


def pod(
    name: str,
    *,
    cpu: int = 1,
    qpu: bool = False,
    group: str | None = None,
    size: int | None = None,
    node_name: str | None = None,
    priority: int = 0,
    annotations: dict | None = None,
    scheduler: str = names.SCHEDULER_NAME,
) -> dict:
    """A pod as it reaches the webhook: its gang named by the group label (and size)."""
    marks = dict(annotations or {})
    if size:
        marks[names.GROUP_SIZE_ANNOTATION] = str(size)
    return make_pod_dict(name, str(cpu), extra={QPU: "1"} if qpu else None, annotations=marks,
                         labels={names.GROUP_LABEL: group} if group else {}, priority=priority,
                         scheduler=scheduler, node_name=node_name, image="x")


@pytest.fixture
def settings():
    return load_settings()


@pytest.fixture
def admission():
    return AdmissionSettings(control="on", reserve_cores=0)


@pytest.fixture
def cluster():
    fake = FakeCluster()
    fake.create("nodes", node("n1", 8))
    fake.create("nodes", node("n2", 8))
    return fake


@pytest.fixture
def control(cluster, admission):
    return AdmissionControl(cluster, admission)


def ctx(settings, cluster, **extra):
    return AdmissionContext(settings=settings, cluster=cluster, namespace="default", **extra)


def sealed(obj):
    """``obj`` as the quantum split leaves a member of a hybrid group: with its seal (the
    service checks a seal before any handler runs; the mark handler only looks for one)."""
    obj = copy.deepcopy(obj)
    obj["metadata"].setdefault("annotations", {})[names.SPLIT_SEAL_ANNOTATION] = "by-the-split"
    return obj


def store(cluster, obj, control=None, settings=None):
    """Create a pod as the webhook would leave it: with ``control``, a hybrid group's member
    (sealed, then given the admission marks)."""
    obj = copy.deepcopy(obj)
    if control is not None:
        obj = sealed(obj)
        handler = MarkHandler()
        wctx = AdmissionContext(settings=settings, cluster=cluster, namespace="default")
        if handler.applies(obj):
            obj = jsonpatch.apply_patch(obj, handler.mutate(obj, wctx))
    return cluster.create("pods", obj, "default")


def test_a_group_that_fits_in_free_cores_is_admitted(control, settings, cluster):
    assert (
        control.admit(pod("q-0", cpu=4, qpu=True, group="q", size=4), ctx(settings, cluster))
        is None
    )


def test_a_group_that_does_not_fit_is_refused_with_needed_and_available(control, settings, cluster):
    store(cluster, pod("busy", cpu=6, node_name="n1", priority=100))
    verdict = control.admit(pod("q-0", cpu=4, qpu=True, group="q", size=3), ctx(settings, cluster))
    assert verdict.startswith("fluence admission control: group q needs 12 cores (3 pods x 4) "
                              "but 10 are available")


def test_lower_priority_unprotected_pods_count_as_preemptible(control, settings, cluster):
    cluster.create(
        "priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": names.QUANTUM_PRIORITY_CLASS},
            "value": 50,
        },
    )
    store(cluster, pod("low", cpu=8, node_name="n1", priority=0))
    store(cluster, pod("high", cpu=4, node_name="n2", priority=100))
    budget = control.budget(50)
    assert (budget.free, budget.preemptible) == (4, 8)
    assert (
        control.admit(pod("q-0", cpu=4, qpu=True, group="q", size=3), ctx(settings, cluster))
        is None
    )


def test_protected_quantum_pods_are_never_preemptible(control, settings, cluster):
    store(
        cluster,
        pod("other-0", cpu=8, qpu=True, group="other", size=1, node_name="n1"),
        control,
        settings,
    )
    assert control.budget(1000).preemptible == 0


def test_a_mark_only_counts_on_a_fluence_pod(control, cluster):
    forged = pod("forged", cpu=8, node_name="n1", scheduler="default-scheduler",
                 annotations={names.PROTECTED_ANNOTATION: "true"})
    store(cluster, forged)
    assert control.budget(1000).preemptible == 8


def test_the_reserve_is_kept_free(settings, cluster):
    control = AdmissionControl(cluster, AdmissionSettings(reserve_cores=6))
    verdict = control.admit(pod("q-0", cpu=4, qpu=True, group="q", size=3), ctx(settings, cluster))
    assert "needs 12 cores" in verdict and "but 10 are available" in verdict


def test_promised_cores_count_against_the_next_group_until_it_starts(control, settings, cluster):
    first = pod("a-0", cpu=4, qpu=True, group="a", size=3)
    assert control.admit(first, ctx(settings, cluster)) is None  # promises 12 of 16
    verdict = control.admit(pod("b-0", cpu=4, qpu=True, group="b", size=2), ctx(settings, cluster))
    assert "needs 8 cores" in verdict and "but 4 are available" in verdict
    # The group's pods are created and all three bind: the promise becomes real usage.
    for i, where in enumerate(("n1", "n2", "n2")):
        store(
            cluster,
            pod(f"a-{i}", cpu=4, qpu=True, group="a", size=3, node_name=where),
            control,
            settings,
        )
    assert control.budget(0).promised == 0


def test_promises_are_rebuilt_from_the_cluster_after_a_restart(control, settings, cluster):
    store(
        cluster, pod("a-0", cpu=4, qpu=True, group="a", size=3), control, settings
    )  # admitted, pending
    restarted = AdmissionControl(cluster, AdmissionSettings())
    assert restarted.budget(0).promised == 12
    verdict = restarted.admit(
        pod("b-0", cpu=4, qpu=True, group="b", size=2), ctx(settings, cluster)
    )
    assert "but 4 are available" in verdict


def test_a_deleted_group_gives_its_promise_back(control, settings, cluster):
    store(cluster, pod("a-0", cpu=4, qpu=True, group="a", size=3), control, settings)
    control.admit(pod("a-0", cpu=4, qpu=True, group="a", size=3), ctx(settings, cluster))
    cluster.delete("pods", "a-0", "default")
    assert control.budget(0).promised == 0


def test_later_pods_of_an_admitted_group_are_not_rechecked(control, settings, cluster):
    assert (
        control.admit(pod("a-0", cpu=4, qpu=True, group="a", size=4), ctx(settings, cluster))
        is None
    )
    cluster.create("nodes", node("n3", 0))  # nothing changes the verdict for a sibling
    assert (
        control.admit(pod("a-1", cpu=4, qpu=True, group="a", size=4), ctx(settings, cluster))
        is None
    )


def test_a_dry_run_promises_nothing(control, settings, cluster):
    control.admit(
        pod("a-0", cpu=4, qpu=True, group="a", size=3), ctx(settings, cluster, dry_run=True)
    )
    assert control.budget(0).promised == 0


def test_admission_off_admits_everything(settings, cluster):
    control = AdmissionControl(cluster, AdmissionSettings(control="off"))
    assert (
        control.admit(pod("q-0", cpu=64, qpu=True, group="q", size=9), ctx(settings, cluster))
        is None
    )


def test_classical_pods_are_not_judged(control, settings, cluster):
    assert control.admit(pod("big", cpu=640, group="g", size=9), ctx(settings, cluster)) is None


def test_hybrid_group_members_are_marked_and_users_cannot_mark_their_own(
        control, settings, cluster):
    handler = MarkHandler()
    wctx = AdmissionContext(settings=settings, cluster=cluster, namespace="default")
    quantum = sealed(pod("q-0", cpu=2, qpu=True, group="q", size=3))
    marked = jsonpatch.apply_patch(quantum, handler.mutate(quantum, wctx))
    assert marked["metadata"]["annotations"][names.PROTECTED_ANNOTATION] == "true"
    assert marked["metadata"]["annotations"][names.PROMISED_CORES_ANNOTATION] == "6"
    assert handler.mutate(marked, wctx) == []  # idempotent
    forged = pod(
        "f", annotations={names.PROTECTED_ANNOTATION: "true", names.PROMISED_CORES_ANNOTATION: "0"}
    )
    assert handler.applies(forged)
    cleaned = jsonpatch.apply_patch(forged, handler.mutate(forged, wctx))
    assert names.PROTECTED_ANNOTATION not in cleaned["metadata"]["annotations"]
    assert names.PROMISED_CORES_ANNOTATION not in cleaned["metadata"]["annotations"]


def test_a_lone_pod_asking_for_a_qubit_is_not_marked(settings, cluster):
    handler = MarkHandler()
    lone = pod("lone", cpu=2, qpu=True)
    assert handler.applies(lone)
    assert handler.mutate(lone, ctx(settings, cluster)) == []


def test_a_pod_its_owner_labelled_a_worker_is_not_marked(settings, cluster):
    handler = MarkHandler()
    claimed = make_pod_dict("claimed", "2", labels={names.GROUP_LABEL: "g",
                                                    names.ROLE_LABEL: names.ROLE_WORKER},
                            scheduler=names.SCHEDULER_NAME, image="x")
    assert handler.applies(claimed)
    assert handler.mutate(claimed, ctx(settings, cluster)) == []


def test_through_the_webhook_the_splits_scout_and_workers_are_marked(cluster):
    cluster.create("jobs", {"apiVersion": "batch/v1", "kind": "Job",
                            "metadata": {"name": "qj", "namespace": "default", "uid": "job-uid"},
                            "spec": {"completions": 3, "parallelism": 3,
                                     "completionMode": "Indexed",
                                     "template": {"spec": {"containers": []}}}}, "default")
    service = plugin_service(cluster, [0.0])  # the quantum split among the built-ins
    marks = {}
    for index in range(3):
        member = pod(f"qj-{index}", cpu=2, qpu=True, group="qj", annotations={
            names.COORDINATION_ANNOTATION: names.COORDINATION_SHARED,
            names.JOB_COMPLETION_INDEX: str(index)})
        member["metadata"]["labels"][names.JOB_COMPLETION_INDEX] = str(index)
        member["metadata"]["ownerReferences"] = [job_owner("qj", "job-uid")]
        response = service.review(review_body(member, f"u{index}")).response
        patch = json.loads(base64.b64decode(response["patch"]))
        notes = jsonpatch.apply_patch(member, patch)["metadata"]["annotations"]
        marks[index] = (notes[names.PROTECTED_ANNOTATION],
                        notes[names.PROMISED_CORES_ANNOTATION])
    assert marks == {0: ("true", "6"), 1: ("true", "6"), 2: ("true", "6")}


def test_through_the_webhook_an_over_budget_group_is_denied_with_the_message(
    control, settings, cluster
):
    service = AdmissionService(settings, [MarkHandler()], cluster=cluster, admit=control.admit)
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "namespace": "default",
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "object": pod("q-0", cpu=8, qpu=True, group="q", size=4)}}
    response = service.review(json.dumps(body).encode()).response
    assert response["allowed"] is False
    assert (
        "group q needs 32 cores (4 pods x 8) but 16 are available" in response["status"]["message"]
    )
    assert plugin.fluence_admit is not None


# -- injection: each service its own control, on the clock it is given ---------


def review_body(obj, uid="u1"):
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": uid, "operation": "CREATE", "namespace": "default",
                                   "resource": {"group": "", "version": "v1", "resource": "pods"},
                                   "object": obj}}).encode()


def plugin_service(cluster, now):
    """The webhook as Fluence builds it, with only this plugin's hooks and the given clock."""
    settings = load_settings()
    manager = get_plugin_manager(settings)
    return build_service(settings, manager, cluster, clock=lambda: now[0])


def test_a_pending_promise_ages_by_the_clock_the_service_injects(cluster):
    now = [0.0]
    service = plugin_service(cluster, now)
    first = service.review(review_body(pod("a-0", cpu=4, qpu=True, group="a", size=3)))
    assert first.response["allowed"] is True  # promises 12 of 16, the pod is never stored
    refused = service.review(review_body(pod("b-0", cpu=4, qpu=True, group="b", size=2), "u2"))
    assert "group b needs 8 cores" in refused.response["status"]["message"]
    now[0] = PENDING_GRACE + 1  # virtual time passes; the wall clock did not move
    assert service.review(review_body(pod("b-0", cpu=4, qpu=True, group="b", size=2),
                                      "u3")).response["allowed"] is True


def test_two_services_keep_separate_promises(cluster):
    one, two = plugin_service(cluster, [0.0]), plugin_service(cluster, [0.0])
    assert one.review(review_body(pod("a-0", cpu=4, qpu=True, group="a", size=3))).response[
        "allowed"
    ]
    assert two.review(review_body(pod("b-0", cpu=4, qpu=True, group="b", size=3))).response[
        "allowed"
    ]


# -- settings: FLUENCE_ADMISSION_*, the old names still read --------------------


@pytest.fixture
def no_admission_env(monkeypatch):
    for variable in ("FLUENCE_ADMISSION", "FLUENCE_ADMISSION_CONTROL", "FLUENCE_RESERVE_CORES",
                     "FLUENCE_ADMISSION_RESERVE_CORES"):
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_fluence_admission_defaults_to_on(no_admission_env):
    assert AdmissionSettings.load().control is Switch.ON


def test_fluence_reserve_cores_defaults_to_0(no_admission_env):
    assert AdmissionSettings.load().reserve_cores == 0


@pytest.mark.parametrize(("variable", "text", "field", "value"), [
    ("FLUENCE_ADMISSION_CONTROL", "off", "control", Switch.OFF),
    ("FLUENCE_ADMISSION", "off", "control", Switch.OFF),
    ("FLUENCE_ADMISSION", "OFF", "control", Switch.OFF),
    ("FLUENCE_ADMISSION_RESERVE_CORES", "4", "reserve_cores", 4),
    ("FLUENCE_RESERVE_CORES", "4", "reserve_cores", 4),
])
def test_each_variable_is_read_by_its_name_and_its_old_name(no_admission_env, variable, text, field,
                                                            value):
    no_admission_env.setenv(variable, text)
    assert getattr(AdmissionSettings.load(), field) == value


def test_the_new_name_wins_over_the_old(no_admission_env):
    no_admission_env.setenv("FLUENCE_RESERVE_CORES", "4")
    no_admission_env.setenv("FLUENCE_ADMISSION_RESERVE_CORES", "2")
    assert AdmissionSettings.load().reserve_cores == 2


@pytest.mark.parametrize(("variable", "text"), [("FLUENCE_ADMISSION", "maybe"),
                                                ("FLUENCE_RESERVE_CORES", "-1")])
def test_a_bad_value_is_a_settings_error_naming_the_variable(no_admission_env, variable, text):
    no_admission_env.setenv(variable, text)
    with pytest.raises(SettingsError, match=f"{variable}={text!r}"):
        AdmissionSettings.load()


def test_fluence_settings_contributes_the_admission_settings():
    assert AdmissionSettings in plugin.fluence_settings()


def test_a_group_whose_pods_are_never_stored_gives_its_promise_back_after_the_grace(
        settings, cluster, admission):
    now = [0.0]
    control = AdmissionControl(cluster, admission, clock=lambda: now[0])
    assert control.admit(pod("ghost-0", cpu=4, qpu=True, group="ghost", size=4),
                         ctx(settings, cluster)) is None  # promises all 16 cores
    assert "needs 4 cores" in control.admit(pod("real-0", cpu=4, qpu=True, group="real", size=1),
                                            ctx(settings, cluster))
    now[0] = 16  # past the grace (once 120 s): the ghost's pods were never stored
    assert control.admit(pod("real-0", cpu=4, qpu=True, group="real", size=1),
                         ctx(settings, cluster)) is None


def test_a_lone_pod_re_using_a_name_is_judged_afresh(control, settings, cluster):
    assert control.admit(pod("solo", cpu=12, qpu=True), ctx(settings, cluster, uid="r1")) is None
    verdict = control.admit(pod("solo", cpu=1000, qpu=True), ctx(settings, cluster, uid="r2"))
    assert verdict is not None and "needs 1000 cores" in verdict
    assert control.admit(pod("solo", cpu=12, qpu=True), ctx(settings, cluster, uid="r1")) is None, \
        "a re-invocation of the same request is not judged twice"


def test_a_sibling_asking_more_per_pod_than_its_group_promised_is_judged(
        control, settings, cluster):
    first = pod("a-0", cpu=1, qpu=True, group="a", size=2)
    assert control.admit(first, ctx(settings, cluster)) is None
    bigger = pod("a-1", cpu=100, qpu=True, group="a", size=2)
    verdict = control.admit(bigger, ctx(settings, cluster))
    assert verdict is not None and "needs 200 cores" in verdict


def test_a_node_that_cannot_be_read_does_not_stop_admission(control, settings, cluster):
    cluster.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad"},
                             "status": {"allocatable": {"cpu": "1e5000"}}})
    admitted = control.admit(pod("a-0", cpu=4, qpu=True, group="a", size=2), ctx(settings, cluster))
    assert admitted is None


def test_bound_pods_are_sized_by_kube_schedulers_rule_sidecars_and_pod_level_included(
        control, settings, cluster):
    theirs = pod("theirs", cpu=0, node_name="n1", priority=100, scheduler="default-scheduler")
    theirs["spec"]["containers"][0]["resources"] = {}
    theirs["spec"]["resources"] = {"requests": {"cpu": "6"}}
    side = pod("side", cpu=2, node_name="n2", priority=100)
    side["spec"]["initContainers"] = [{"name": "s", "image": "x", "restartPolicy": "Always",
                                       "resources": {"requests": {"cpu": "2"}}}]
    store(cluster, theirs)
    store(cluster, side)
    verdict = control.admit(pod("q-0", cpu=4, qpu=True, group="q", size=2), ctx(settings, cluster))
    assert verdict is not None and "needs 8 cores" in verdict and "but 6 are available" in verdict


def test_fractional_pods_take_their_share_of_the_free_cores(control, settings, cluster):
    for i in range(4):
        half = pod(f"half-{i}", node_name="n1", priority=100)
        half["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
        store(cluster, half)
    verdict = control.admit(pod("q-0", cpu=8, qpu=True, group="q", size=2), ctx(settings, cluster))
    assert verdict is not None and "but 14 are available" in verdict
