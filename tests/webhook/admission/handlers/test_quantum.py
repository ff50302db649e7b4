"""The ``quantum`` handler (``hybrid/split.py``) through admission: a shared quantum group
becomes one scout and gated workers, the job controller's gang of N goes, and a pod
admitted twice is admitted the same."""

from __future__ import annotations

import pytest

from webhook_helpers import QPU, admit, container, env_of, pod, shared

from fluence_core import names


def annotation_ref(annotation: str) -> str:
    return f"metadata.annotations['{annotation}']"



# -- quantum split -------------------------------------------------------------


def test_the_scout_gets_its_own_group_the_staged_interceptor_and_the_sidecar(
    service, cluster, settings
):
    response, out = admit(service, shared("qj-0", 0))
    assert response["allowed"]
    spec = out["spec"]
    assert spec["schedulingGroup"] == {"podGroupName": "qj-scout"}
    assert "schedulingGates" not in spec
    assert out["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_SCOUT
    stage = container(out, names.STAGE_CONTAINER, "initContainers")
    assert stage["command"] == ["fluence", "stage", names.RUNTIME_MOUNT]
    assert stage["image"] == settings.hybrid.runtime_image
    assert {"name": names.RUNTIME_VOLUME, "emptyDir": {}} in spec["volumes"]
    app = container(out, "app")
    assert env_of(app)["PYTHONPATH"] == names.RUNTIME_MOUNT
    assert env_of(app)[names.ENV_ROLE] == names.ROLE_SCOUT
    assert app["resources"]["requests"][QPU] == "1"  # the scout holds the quantum request
    assert {"name": names.RUNTIME_VOLUME, "mountPath": names.RUNTIME_MOUNT} in app["volumeMounts"]
    sidecar = container(out, names.SIDECAR_CONTAINER)
    assert sidecar["command"] == ["fluence", "sidecar"]
    assert env_of(sidecar)[names.ENV_GROUP_SIZE] == "4"
    assert "serviceAccountName" not in spec, "the scout keeps its own ServiceAccount"
    scout_group = cluster.get("podgroups", "qj-scout", "default")
    assert scout_group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 1


@pytest.mark.parametrize("account", [None, "ci-deployer"])
def test_the_scout_grants_no_rights_to_any_service_account(service, cluster, account):
    extra = {"serviceAccountName": account} if account else {}
    response, out = admit(service, shared("qj-0", 0, **extra))
    assert response["allowed"]
    assert out["spec"].get("serviceAccountName") == account
    for kind in ("roles", "rolebindings", "serviceaccounts", "clusterroles", "clusterrolebindings"):
        assert cluster.list(kind).items == [], f"the webhook created {kind}"


def test_a_worker_is_gated_prioritised_and_loses_its_virtual_request(service, cluster):
    cluster.create(
        "priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": names.QUANTUM_PRIORITY_CLASS},
            "value": 1000,
        },
    )
    response, out = admit(service, shared("qj-2", 2))
    assert response["allowed"]
    spec = out["spec"]
    assert spec["schedulingGroup"] == {"podGroupName": "qj"}
    assert spec["schedulingGates"] == [{"name": names.QUANTUM_GATE}]
    assert spec["priorityClassName"] == names.QUANTUM_PRIORITY_CLASS and spec["priority"] == 1000
    app = container(out, "app")
    assert QPU not in app["resources"]["requests"] and app["resources"]["requests"]["cpu"] == "1"
    env = env_of(app)
    assert env[names.ENV_ROLE] == names.ROLE_WORKER
    assert env[names.ENV_SCOUT_JOB_ID] == annotation_ref(names.SCOUT_JOB_ID_ANNOTATION)
    assert env[names.ENV_SCOUT_SESSION] == annotation_ref(names.SCOUT_SESSION_ANNOTATION)
    # The scout's backend, stamped on the worker at release (issue 14: it was absent).
    assert env[names.ENV_BACKEND] == annotation_ref(names.BACKEND_ANNOTATION)
    assert env["FLUXION_DEVICE_ARN"] == annotation_ref(names.attr_annotation("device-arn"))
    assert len(app["env"]) == len(env), "no variable twice"
    assert len(spec["containers"]) == 1 and "initContainers" not in spec
    workers = cluster.get("podgroups", "qj", "default")
    assert workers["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3


def test_a_worker_keeps_the_users_priority_class(service):
    _, out = admit(service, shared("qj-1", 1, priorityClassName="mine"))
    assert out["spec"]["priorityClassName"] == "mine"


def test_a_worker_without_the_priority_class_installed_gets_a_warning(service):
    response, out = admit(service, shared("qj-1", 1))
    assert "priorityClassName" not in out["spec"]
    assert any(names.QUANTUM_PRIORITY_CLASS in w for w in response["warnings"])


def test_the_gate_name_is_a_setting(settings, cluster, config):
    from fluence_core.hybrid.split import QuantumSplitHandler
    from fluence_core.webhook.admission.review import AdmissionService

    settings = settings.replaced(quantum_gate="example.org/wait")
    service = AdmissionService(settings, [QuantumSplitHandler(settings)], cluster=cluster)
    _, out = admit(service, shared("qj-1", 1))
    assert out["spec"]["schedulingGates"] == [{"name": "example.org/wait"}]


def _job_group(cluster, name: str, job: str = "qj", uid: str = "job-uid") -> None:
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": True}]
    cluster.create(
        "podgroups",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": owner},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
        },
        "default",
    )


def test_job_controller_groups_are_re_pointed_and_the_gang_of_n_is_removed(service, cluster):
    _job_group(cluster, "qj-abc12")
    grouped = {"schedulingGroup": {"podGroupName": "qj-abc12"}}
    _, scout = admit(service, shared("qj-0", 0, **grouped))
    _, worker = admit(service, shared("qj-1", 1, **grouped))
    assert scout["spec"]["schedulingGroup"]["podGroupName"] == "qj-scout"
    assert worker["spec"]["schedulingGroup"]["podGroupName"] == "qj"
    remaining = {
        g["metadata"]["name"]: g["spec"]["schedulingPolicy"]["gang"]["minCount"]
        for g in cluster.list("podgroups", "default").items
    }
    assert remaining == {"qj-scout": 1, "qj": 3}


@pytest.mark.parametrize(
    ("owner", "why"),
    [
        (None, "a PodGroup nobody controls"),
        (("other-job", "other-uid"), "another Job's PodGroup"),
        (("qj", "forged-uid"), "a PodGroup naming the pod's Job with another uid"),
    ],
)
def test_a_pod_naming_a_podgroup_its_job_does_not_control_deletes_nothing(
    service, cluster, owner, why
):
    if owner is None:
        cluster.create(
            "podgroups",
            {
                "apiVersion": "scheduling.k8s.io/v1alpha2",
                "kind": "PodGroup",
                "metadata": {"name": "victim-training", "namespace": "default"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 8}}},
            },
            "default",
        )
    else:
        _job_group(cluster, "victim-training", *owner)
    grouped = {"schedulingGroup": {"podGroupName": "victim-training"}}
    response, scout = admit(service, shared("qj-0", 0, **grouped))
    assert response["allowed"]
    assert scout["spec"]["schedulingGroup"]["podGroupName"] == "qj-scout"
    assert cluster.get("podgroups", "victim-training", "default") is not None, why


def test_a_pod_without_a_controlling_job_deletes_nothing(service, cluster):
    _job_group(cluster, "qj-abc12")
    obj = shared("qj-0", 0, schedulingGroup={"podGroupName": "qj-abc12"})
    obj["metadata"]["ownerReferences"][0]["controller"] = False
    admit(service, obj)
    assert cluster.get("podgroups", "qj-abc12", "default") is not None


def test_independent_quantum_groups_are_not_split(service, cluster):
    obj = pod("i-1", group="ind", qpu=1, index=1, job="qj")
    _, out = admit(service, obj)
    assert "schedulingGates" not in out["spec"]
    assert container(out, "app")["resources"]["requests"][QPU] == "1"
    assert out["spec"]["schedulingGroup"]["podGroupName"] == "ind"
    assert (
        cluster.get("podgroups", "ind", "default")["spec"]["schedulingPolicy"]["gang"]["minCount"]
        == 4
    )


def test_shared_coordination_without_a_completion_index_is_refused(service):
    obj = pod("x", group="qj", qpu=1, annotations={names.COORDINATION_ANNOTATION: "shared"})
    response, _ = admit(service, obj)
    assert not response["allowed"]
    assert "handler quantum" in response["status"]["message"]
    assert names.JOB_COMPLETION_INDEX in response["status"]["message"]


def test_reinvoking_the_scout_adds_no_second_sidecar_or_init_container(service):
    _, once = admit(service, shared("qj-0", 0))
    _, twice = admit(service, once)
    assert [c["name"] for c in twice["spec"]["containers"]] == ["app", names.SIDECAR_CONTAINER]
    assert [c["name"] for c in twice["spec"]["initContainers"]] == [names.STAGE_CONTAINER]


def test_the_scout_prepends_the_runtime_to_an_existing_pythonpath(service):
    obj = shared("qj-0", 0)
    obj["spec"]["containers"][0]["env"] = [{"name": "PYTHONPATH", "value": "/app"}]
    _, out = admit(service, obj)
    env = env_of(container(out, "app"))
    assert (
        env["PYTHONPATH"] == f"{names.RUNTIME_MOUNT}:/app"
        and env[names.ENV_ROLE] == names.ROLE_SCOUT
    )
    _, again = admit(service, out)
    assert env_of(container(again, "app"))["PYTHONPATH"] == f"{names.RUNTIME_MOUNT}:/app"
