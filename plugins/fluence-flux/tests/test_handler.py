"""The flux handler on Jobs and JobSets: patched objects, side effects, refusals."""

from __future__ import annotations

import base64

import pytest
from fluence_flux.handler import (
    INIT_CONTAINER,
    SCRIPTS_VOLUME,
    SHM_VOLUME,
    VIEW_VOLUME,
    FluxHandler,
)
from fluence_flux.settings import DEFAULT_VIEW_IMAGE, FluxSettings
from fluence_core.api import TRAINJOBS
from fluence_flux.trainer import CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES
from flux_helpers import JOBSET_API, admit, job, jobset
from kubernetes.client import ApiClient

from fluence_core.api import load_settings, names
from fluence_core.testing import AdmissionService, FakeCluster


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


def make_service(cluster, **flux_settings) -> tuple[AdmissionService, FluxHandler]:
    handler = FluxHandler(FluxSettings(**flux_settings))
    return AdmissionService(load_settings(), [handler], cluster=cluster), handler


@pytest.fixture
def service(cluster) -> AdmissionService:
    return make_service(cluster)[0]


def as_v1_job(obj):
    """The Kubernetes client's model of the Job: fails on a missing required field."""
    return ApiClient()._ApiClient__deserialize(obj, "V1Job")


def pod_spec(obj):
    if obj["kind"] == "Job":
        return obj["spec"]["template"]["spec"]
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_an_opted_in_job_gets_the_flux_view_init_container_and_the_wrapped_command(service):
    response, out = admit(service, job(command=["lmp", "-in", "in.lj"], args=["-nocite"]))
    assert response["allowed"] is True
    model = as_v1_job(out)
    spec = model.spec.template.spec
    init = spec.init_containers[0]
    assert (init.name, init.image) == (INIT_CONTAINER, DEFAULT_VIEW_IMAGE)
    assert init.command == ["/bin/bash", "/fluence/flux/init.sh"]
    app = spec.containers[0]
    assert app.image == "ubuntu:22.04"  # the user's image, untouched
    assert app.command == ["/bin/bash", "/fluence/flux/entrypoint.sh"]
    assert app.args == ["lmp", "-in", "in.lj", "-nocite"]
    assert {(m.name, m.mount_path) for m in app.volume_mounts} == {
        (VIEW_VOLUME, "/mnt/flux"), (SCRIPTS_VOLUME, "/fluence/flux"), (SHM_VOLUME, "/dev/shm")}
    volumes = {v.name: v for v in spec.volumes}
    assert volumes[SHM_VOLUME].empty_dir.medium == "Memory"
    assert volumes[SHM_VOLUME].empty_dir.size_limit == "1Gi"
    sources = volumes[SCRIPTS_VOLUME].projected.sources
    assert sources[0].config_map.name == "lmp-flux" and sources[1].secret.name == "lmp-flux-curve"
    assert spec.subdomain == "lmp"
    term = spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution[0]
    assert term.pod_affinity_term.topology_key == "kubernetes.io/hostname"
    assert term.pod_affinity_term.label_selector.match_labels == {
        "batch.kubernetes.io/job-name": "lmp"
    }
    assert spec.affinity.node_affinity is None


def test_the_configmap_secret_and_service_are_made_for_the_stored_job_and_owned_by_it(
        service, cluster):
    admit(service, job(), store=False)
    assert cluster.list("configmaps", "default").items == []  # the review makes nothing
    _, rewritten = admit(service, job())  # stored, and the controller hears of it
    stored = cluster.get("jobs", "lmp", "default")
    assert stored["metadata"]["labels"] == {names.FLUX_LABEL: "true"}
    config = cluster.get("configmaps", "lmp-flux", "default")
    assert set(config["data"]) == {"init.sh", "entrypoint.sh"}
    assert "-N \"$nodes\" --tasks-per-node" in config["data"]["entrypoint.sh"]
    cert = base64.b64decode(
        cluster.get("secrets", "lmp-flux-curve", "default")["data"]["curve.cert"]
    ).decode()
    assert "public-key" in cert and "secret-key" in cert
    svc = cluster.get("services", "lmp", "default")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"batch.kubernetes.io/job-name": "lmp"}
    for kind, name in (
        ("configmaps", "lmp-flux"),
        ("secrets", "lmp-flux-curve"),
        ("services", "lmp"),
    ):
        refs = cluster.get(kind, name, "default")["metadata"]["ownerReferences"]
        assert refs == [{"apiVersion": "batch/v1", "kind": "Job", "name": "lmp",
                         "uid": stored["metadata"]["uid"]}]


def test_a_stored_job_its_user_labelled_but_flux_did_not_rewrite_gets_nothing(
        service, cluster):
    labelled = job()
    labelled["metadata"]["labels"] = {names.FLUX_LABEL: "true"}
    stored = cluster.create("jobs", labelled, "default")
    service.controller.stored(service.handlers[0], stored)
    assert cluster.list("configmaps", "default").items == []


def test_a_dry_run_patches_but_creates_nothing(service, cluster):
    response, out = admit(service, job(), dry_run=True)
    assert pod_spec(out)["initContainers"][0]["name"] == INIT_CONTAINER
    assert cluster.get("configmaps", "lmp-flux", "default") is None


def test_a_rewritten_job_comes_back_unchanged_when_reinvoked(service):
    _, once = admit(service, job())
    response, twice = admit(service, once)
    assert "patch" not in response and twice == once


def test_a_job_without_the_annotation_is_left_alone(service, cluster):
    response, out = admit(service, job(flux=False))
    assert response == {"uid": "req-1", "allowed": True}
    assert cluster.get("configmaps", "lmp-flux", "default") is None


def test_the_workload_settings_come_from_annotations(service, cluster):
    admit(service, job(annotations={names.FLUX_TASKS_PER_NODE_ANNOTATION: "8",
                                    names.FLUX_QUEUE_POLICY_ANNOTATION: "easy",
                                    names.FLUX_NETWORK_DEVICE_ANNOTATION: "net1"}))
    data = cluster.get("configmaps", "lmp-flux", "default")["data"]
    assert "tasks_per_node=8" in data["entrypoint.sh"] and "nodes=4" in data["entrypoint.sh"]
    assert 'queue-policy = "easy"' in data["init.sh"]
    assert 'default_bind = "tcp://net1:%p"' in data["init.sh"]
    assert 'host = "lmp-[0-3]"' in data["init.sh"]
    assert 'default_connect = "tcp://%h.lmp:%p"' in data["init.sh"]


def test_the_defaults_are_one_task_fcfs_and_eth0(service, cluster):
    admit(service, job())
    data = cluster.get("configmaps", "lmp-flux", "default")["data"]
    assert "tasks_per_node=1" in data["entrypoint.sh"]
    assert 'queue-policy = "fcfs"' in data["init.sh"] and "tcp://eth0:%p" in data["init.sh"]


@pytest.mark.parametrize(
    "obj, message",
    [
        (job(completionMode="NonIndexed"), "must be an Indexed Job"),
        (job(parallelism=2), "parallelism 2 but completions 4"),
        (job(completions=None), "needs spec.completions"),
        (job(command=[]), "has no command"),
        (job(command=[], args=["--in", "x"]), "cannot read the image's ENTRYPOINT"),
        (
            job(annotations={names.FLUX_TASKS_PER_NODE_ANNOTATION: "zero"}),
            "must be a positive integer",
        ),
        (job(annotations={names.FLUX_QUEUE_POLICY_ANNOTATION: "lifo"}), "must be one of fcfs"),
        (
            job(annotations={names.FLUX_NETWORK_DEVICE_ANNOTATION: "eth0; rm -rf /"}),
            "not an interface name",
        ),
        (job(annotations={names.FLUX_CONTAINER_ANNOTATION: "nope"}), "names no container"),
        (job("x" * 62), "not a DNS label of at most 63"),
        (
            jobset(
                annotations={names.FLUX_ANNOTATION: "true"},
                replicated=[
                    {
                        "name": "node",
                        "replicas": 2,
                        "template": {
                            "spec": {
                                "completionMode": "Indexed",
                                "completions": 2,
                                "parallelism": 2,
                                "template": {
                                    "spec": {
                                        "containers": [
                                            {"name": "a", "image": "x", "command": ["a"]}
                                        ]
                                    }
                                },
                            }
                        },
                    }
                ],
            ),
            "has replicas 2",
        ),
    ],
)
def test_an_object_flux_cannot_run_in_is_refused_with_the_reason(service, cluster, obj, message):
    response, _ = admit(service, obj)
    assert response["allowed"] is False
    assert response["status"]["message"].startswith("fluence webhook handler flux: ")
    assert message in response["status"]["message"]
    assert cluster.list("configmaps", "default").items == []


def test_a_generate_name_job_is_refused(service):
    obj = job()
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "lmp-"
    response, _ = admit(service, obj)
    assert "needs a named Job (not generateName)" in response["status"]["message"]


def test_a_service_of_the_same_name_that_is_not_fluences_refuses_the_job(service, cluster):
    cluster.create(
        "services", {"metadata": {"name": "lmp"}, "spec": {"ports": [{"port": 80}]}}, "default"
    )
    response, _ = admit(service, job())
    assert response["allowed"] is False and "Service default/lmp exists and is not Fluence's" in \
        response["status"]["message"]


def test_a_leftover_configmap_of_an_earlier_job_is_taken_over(service, cluster):
    admit(service, job(annotations={names.FLUX_TASKS_PER_NODE_ANNOTATION: "2"}))
    cluster.patch("configmaps", "lmp-flux", {"metadata": {"ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "lmp", "uid": "gone"}]}}, "default")
    response, _ = admit(service, job(annotations={names.FLUX_TASKS_PER_NODE_ANNOTATION: "6"}))
    assert response["allowed"] is True
    stored = cluster.get("configmaps", "lmp-flux", "default")
    assert "tasks_per_node=6" in stored["data"]["entrypoint.sh"]
    job_now = cluster.get("jobs", "lmp", "default")  # the second Job, stored after the first
    assert [r["uid"] for r in stored["metadata"]["ownerReferences"]] == [
        job_now["metadata"]["uid"]]


def test_the_node_affinity_setting_is_required_and_a_users_affinity_is_kept(cluster):
    service, _ = make_service(
        cluster, node_affinity="node.kubernetes.io/instance-type=c5.4xl|c6.4xl"
    )
    _, out = admit(service, job())
    terms = pod_spec(out)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["c5.4xl", "c6.4xl"],
                }
            ]
        }
    ]
    mine = job()
    mine["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"x": 1}, "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
            "topologyKey": "zone", "labelSelector": {}}}]}}
    response, out = admit(service, mine)
    affinity = pod_spec(out)["affinity"]
    assert affinity["nodeAffinity"] == {"x": 1}
    assert len(affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]) == 2
    assert "keeps its own node affinity" in response["warnings"][0]


def test_a_container_that_mounts_its_own_dev_shm_keeps_it(service):
    obj = job()
    spec = obj["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
    _, out = admit(service, obj)
    assert SHM_VOLUME not in {v["name"] for v in pod_spec(out)["volumes"]}
    assert [m["name"] for m in pod_spec(out)["containers"][0]["volumeMounts"]] == [
        "shm", VIEW_VOLUME, SCRIPTS_VOLUME]


def test_the_flux_container_annotation_chooses_which_container_runs_flux(service):
    obj = job(annotations={names.FLUX_CONTAINER_ANNOTATION: "main"})
    obj["spec"]["template"]["spec"]["containers"].insert(0, {"name": "logger", "image": "busybox"})
    obj["spec"]["template"]["spec"]["containers"][1]["name"] = "main"
    _, out = admit(service, obj)
    logger_container, main = pod_spec(out)["containers"]
    assert "command" not in logger_container
    assert main["args"] == ["lmp", "-in", "in.lj"]


def test_a_jobset_gets_dns_hostnames_and_the_hosts_of_its_node_job(service, cluster):
    obj = jobset(annotations={names.FLUX_ANNOTATION: "true"})
    response, out = admit(service, obj)
    assert response["allowed"] is True
    assert out["apiVersion"] == JOBSET_API and out["spec"]["network"] == {
        "enableDNSHostnames": True
    }
    spec = pod_spec(out)
    assert spec["initContainers"][0]["name"] == INIT_CONTAINER
    assert spec["containers"][0]["args"] == ["python3", "train.py"]
    assert "subdomain" not in spec  # the JobSet controller sets it
    selector = spec["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert selector["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        "jobset.sigs.k8s.io/jobset-name": "train"}
    init = cluster.get("configmaps", "train-flux", "default")["data"]["init.sh"]
    assert 'host = "train-node-0-[0-1]"' in init and "tcp://%h.train:%p" in init
    assert cluster.get("services", "train", "default") is None
    stored = cluster.get("jobsets", "train", "default")
    refs = cluster.get("configmaps", "train-flux", "default")["metadata"]["ownerReferences"]
    assert refs[0]["kind"] == "JobSet" and refs[0]["uid"] == stored["metadata"]["uid"]


def test_a_jobset_keeps_its_network_settings_and_subdomain(service, cluster):
    obj = jobset(annotations={names.FLUX_ANNOTATION: "true"})
    obj["spec"]["network"] = {"subdomain": "mesh", "enableDNSHostnames": False}
    _, out = admit(service, obj)
    assert out["spec"]["network"] == {"subdomain": "mesh", "enableDNSHostnames": True}
    assert (
        "tcp://%h.mesh:%p" in cluster.get("configmaps", "train-flux", "default")["data"]["init.sh"]
    )


def test_a_trainer_jobset_of_several_replicated_jobs_runs_flux_in_the_node_job(service):
    obj = jobset(labels={names.TRAINER_FRAMEWORK_LABEL: "flux"})
    init = {
        "name": "dataset-initializer",
        "replicas": 1,
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "d", "image": "x"}]}}}},
    }
    obj["spec"]["replicatedJobs"].insert(0, init)
    _, out = admit(service, obj)
    assert (
        "initContainers"
        not in out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    )
    node = out["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert node["initContainers"][0]["name"] == INIT_CONTAINER


TRAINER_API = "trainer.kubeflow.org/v1alpha1"


def trainer(cluster, *, ml_policy=None, runtime_labels=None, trainer_spec=None,
            namespaced=False) -> dict:
    """A runtime and a TrainJob ``tj`` using it; the JobSet owner reference Trainer writes."""
    kind, resource = (("TrainingRuntime", TRAINING_RUNTIMES) if namespaced
                      else ("ClusterTrainingRuntime", CLUSTER_TRAINING_RUNTIMES))
    cluster.create(resource, {
        "apiVersion": TRAINER_API, "kind": kind,
        "metadata": {"name": "rt", "labels": dict(runtime_labels or {})},
        "spec": {"mlPolicy": ml_policy or {}}}, "default" if namespaced else None)
    cluster.create(TRAINJOBS, {"apiVersion": TRAINER_API, "kind": "TrainJob",
                               "metadata": {"name": "tj"},
                               "spec": {"runtimeRef": {"name": "rt", "kind": kind,
                                                       "apiGroup": "trainer.kubeflow.org"},
                                        "trainer": dict(trainer_spec or {})}}, "default")
    return {"apiVersion": TRAINER_API, "kind": "TrainJob", "name": "tj", "uid": "tj-uid",
            "controller": True}


def trainer_jobset(owner) -> dict:
    """A JobSet as Trainer makes it: an initializer and a trainer step of its own shape."""
    initializer = {"name": "dataset-initializer", "replicas": 1, "template": {"spec": {
        "template": {"spec": {"containers": [{"name": "d", "image": "x", "command": ["d"]}]}}}}}
    step = {"name": "node", "replicas": 1, "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "node", "image": "x", "command": ["python3", "train.py"]}]}}}}}
    return jobset("tj", replicated=[initializer, step], owner=owner)


def entrypoint(cluster, name="tj") -> str:
    return cluster.get("configmaps", f"{name}-flux", "default")["data"]["entrypoint.sh"]


def test_a_trainjob_whose_runtime_sets_ml_policy_flux_gets_its_trainer_step_rewritten(
    service, cluster
):
    owner = trainer(cluster, ml_policy={"numNodes": 3, "flux": {"numProcPerNode": 4}})
    _, out = admit(service, trainer_jobset(owner))
    initializer, step = out["spec"]["replicatedJobs"]
    assert "initContainers" not in initializer["template"]["spec"]["template"]["spec"]
    assert (
        step["template"]["spec"]["template"]["spec"]["initContainers"][0]["name"] == INIT_CONTAINER
    )
    job_spec = step["template"]["spec"]
    assert (job_spec["completionMode"], job_spec["completions"], job_spec["parallelism"]) == (
        "Indexed", 3, 3)
    assert "nodes=3" in entrypoint(cluster) and "tasks_per_node=4" in entrypoint(cluster)
    init = cluster.get("configmaps", "tj-flux", "default")["data"]["init.sh"]
    assert 'host = "tj-node-0-[0-2]"' in init


def test_the_trainjobs_own_sizes_override_the_runtimes(service, cluster):
    owner = trainer(cluster, ml_policy={"numNodes": 3, "flux": {"numProcPerNode": 4}},
                    trainer_spec={"numNodes": 5, "numProcPerNode": 2})
    _, out = admit(service, trainer_jobset(owner))
    assert out["spec"]["replicatedJobs"][1]["template"]["spec"]["completions"] == 5
    assert "nodes=5" in entrypoint(cluster) and "tasks_per_node=2" in entrypoint(cluster)


def test_a_namespaced_training_runtime_with_an_empty_flux_policy_counts(service, cluster):
    owner = trainer(cluster, ml_policy={"flux": {}}, namespaced=True)
    _, out = admit(service, trainer_jobset(owner))
    # Neither says how many nodes: Trainer's default, one; one task per node.
    assert out["spec"]["replicatedJobs"][1]["template"]["spec"]["completions"] == 1
    assert "nodes=1" in entrypoint(cluster) and "tasks_per_node=1" in entrypoint(cluster)


def test_a_runtime_labelled_flux_still_counts_and_the_jobsets_counts_stand(service, cluster):
    owner = trainer(cluster, runtime_labels={names.TRAINER_FRAMEWORK_LABEL: "flux"},
                    trainer_spec={"numProcPerNode": 4})
    _, out = admit(service, jobset(owner=owner))
    assert pod_spec(out)["initContainers"][0]["name"] == INIT_CONTAINER
    assert "nodes=2" in entrypoint(cluster, "train") and "tasks_per_node=4" in entrypoint(
        cluster, "train")


def test_the_num_proc_annotation_wins_over_the_trainjob(service, cluster):
    owner = trainer(cluster, ml_policy={"flux": {"numProcPerNode": 4}})
    obj = trainer_jobset(owner)
    obj["metadata"]["annotations"] = {names.FLUX_TASKS_PER_NODE_ANNOTATION: "6"}
    admit(service, obj)
    assert "tasks_per_node=6" in entrypoint(cluster)


@pytest.mark.parametrize(
    "ml_policy, trainer_spec, message",
    [
        (
            {"flux": {"numProcPerNode": "auto"}},
            {},
            "ClusterTrainingRuntime rt spec.mlPolicy.flux.numProcPerNode='auto' "
            "must be a positive integer",
        ),
        (
            {"flux": {}},
            {"numNodes": 0},
            "TrainJob default/tj spec.trainer.numNodes=0 must be a positive integer",
        ),
    ],
)
def test_a_bad_size_is_refused_naming_the_field(service, cluster, ml_policy, trainer_spec, message):
    owner = trainer(cluster, ml_policy=ml_policy, trainer_spec=trainer_spec)
    response, _ = admit(service, trainer_jobset(owner))
    assert response["allowed"] is False
    assert message in response["status"]["message"]


def test_a_trainjob_without_ml_policy_flux_is_left_alone(service, cluster):
    owner = trainer(cluster, ml_policy={"numNodes": 2, "torch": {"numProcPerNode": "auto"}})
    response, _ = admit(service, trainer_jobset(owner))
    assert response == {"uid": "req-1", "allowed": True}
    assert cluster.get("configmaps", "tj-flux", "default") is None


def test_a_trainjob_jobset_where_trainer_is_not_installed_is_left_alone(service, cluster):
    owner = {"apiVersion": TRAINER_API, "kind": "TrainJob", "name": "tj", "uid": "u"}
    response, _ = admit(service, trainer_jobset(owner))  # no TrainJob to read
    assert response == {"uid": "req-1", "allowed": True}


def test_every_broker_pod_is_one_fluence_gang_of_the_node_count(service):
    _, out = admit(service, job())
    template = out["spec"]["template"]
    assert template["spec"]["schedulerName"] == names.SCHEDULER_NAME
    assert template["metadata"]["labels"] == {names.GROUP_LABEL: "lmp"}
    assert template["metadata"]["annotations"] == {names.GROUP_SIZE_ANNOTATION: "4"}


def test_a_users_group_label_is_kept_and_a_jobsets_trainer_step_is_the_gang(service, cluster):
    owner = trainer(cluster, ml_policy={"numNodes": 3, "flux": {}})
    obj = trainer_jobset(owner)
    step = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    step["metadata"] = {"labels": {names.GROUP_LABEL: "mine"}}
    _, out = admit(service, obj)
    template = out["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert template["metadata"]["labels"] == {names.GROUP_LABEL: "mine"}
    assert template["metadata"]["annotations"] == {names.GROUP_SIZE_ANNOTATION: "3"}
    assert "schedulerName" not in out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]


def test_the_api_servers_default_scheduler_is_replaced_by_fluence(service):
    obj = job()
    obj["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"  # defaulted before us
    _, out = admit(service, obj)
    assert out["spec"]["template"]["spec"]["schedulerName"] == names.SCHEDULER_NAME
    assert out["spec"]["template"]["metadata"]["labels"] == {names.GROUP_LABEL: "lmp"}


def test_a_template_for_another_scheduler_keeps_it_with_a_warning(service):
    obj = job()
    obj["spec"]["template"]["spec"]["schedulerName"] = "volcano"
    response, out = admit(service, obj)
    assert out["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    assert "labels" not in out["spec"]["template"].get("metadata", {})
    assert any("not placed as one gang" in w for w in response["warnings"])


def test_the_handler_arrives_through_the_plugin_hook():
    from fluence_core.testing import build_service, get_plugin_manager

    settings = load_settings()
    service = build_service(settings, get_plugin_manager(settings), None)
    flux = next(h for h in service.handlers if h.name == "flux")
    assert flux.resources == ("batch/jobs", "jobset.x-k8s.io/jobsets")
