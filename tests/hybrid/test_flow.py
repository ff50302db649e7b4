"""The hybrid flow, whole, on the in-memory cluster: webhook -> scheduler -> sidecar -> scheduler.

The pieces are tested alone elsewhere; this proves they agree at their seams:

* the webhook splits a shared-coordination Indexed Job into a scout and gated
  workers, and injects the sidecar's configuration;
* the scheduler binds the scout with the backend annotations and leaves the
  gated workers Pending, holding nothing;
* the sidecar is configured from *exactly* the env the webhook wrote into its
  container (downward API resolved against the stored pod, as the kubelet
  would), resolves its provider from the ``FLUXION_*`` attributes the scheduler
  chose, and at the ungate position stamps the workers and removes the named gate;
* the scheduler then binds the three workers together.

The vendor queue is the scripted fake at the provider boundary; time is virtual.
The same flow against a real kube-apiserver is tests/e2e/test_hybrid_flow_e2e.py.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from fluence_core import names
from fluence_core.kube.api import NAMESPACES, PODGROUPS, PODS, PRIORITY_CLASSES
from fluence_core.kube.downward import container_env
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.manifests import read_objects
from fluence_core.plugins import get_plugin_manager
from fluence_core.runtime.fake_provider import FakeQueueProvider, FakeTask
from fluence_core.runtime.provider import collect_providers
from fluence_core.hybrid.reporter import LocalReporter
from fluence_core.hybrid.sidecar import Outcome, VirtualClock, sidecar_from_env
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import indexed_job_pods, make_node_dict
from fluence_core.webhook import build_service
from tests.hybrid.case import RESOURCES, SCRIPT, sidecar_settings_from


pytestmark = pytest.mark.usefixtures("clean_env")

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "hybrid"
GATE = "example.org/hybrid-ready"  # not the default: the webhook gates and Fluence ungates it


def admit(service: Any, pod: dict[str, Any]) -> dict[str, Any]:
    """What the API server does at CREATE: call the webhook, apply its JSON patch."""
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": f"req-{pod['metadata']['name']}",
                          "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "operation": "CREATE", "namespace": NAMESPACE, "object": pod}}
    response = service.review(json.dumps(review).encode()).body["response"]
    assert response["allowed"], response
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    result: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(pod), patch)
    return result


def env_sources(container: dict[str, Any]) -> dict[str, str]:
    """name -> literal value or the fieldPath it is read from."""
    return {e["name"]: e["value"] if "value" in e else e["valueFrom"]["fieldRef"]["fieldPath"]
            for e in container.get("env") or []}


def by_name(pod: dict[str, Any], name: str, section: str = "containers") -> dict[str, Any]:
    return next(c for c in pod["spec"].get(section) or [] if c["name"] == name)


def flow_world(tmp_path: Path) -> dict[str, Any]:
    """What every hybrid flow test starts from: the settings over ``resources.yaml``, a
    cluster of three 4-core nodes with the PriorityClass exactly as deploy/fluence.yaml
    installs it, and the example Job (not created)."""
    resources = tmp_path / "resources.yaml"
    resources.write_text(RESOURCES)
    settings = load_settings(resources=resources, runtime_image="example.org/fluence:flow",
                             quantum_gate=GATE)
    cluster = FakeCluster()
    cluster.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    for name in ("n0", "n1", "n2"):
        cluster.create("nodes", make_node_dict(name, 4, "16Gi", capacity=True))
    (priority_class,) = read_objects(REPO / "deploy" / "fluence.yaml", kind="PriorityClass")
    cluster.create(PRIORITY_CLASSES, priority_class)
    (job,) = read_objects(REPO / "examples" / "quantum-shared-job.yaml", kind="Job")
    return {"settings": settings, "cluster": cluster, "job": job, "resources": resources,
            "priority_class": priority_class, "tmp": tmp_path}


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    found = flow_world(tmp_path)
    found["job"] = found["cluster"].create("jobs", found["job"], NAMESPACE)
    found["runtime"] = tmp_path / "emptydir"
    return found


def test_webhook_scheduler_and_sidecar_release_the_workers_together(
    world, monkeypatch, capsys
) -> None:
    settings, cluster, job = world["settings"], world["cluster"], world["job"]
    qpu = names.extended_resource("qpu")

    # -- 1. admission: the split --------------------------------------------------------------
    service = build_service(settings, get_plugin_manager(settings), cluster)
    for pod in indexed_job_pods(job):
        stored = cluster.create(PODS, admit(service, pod), NAMESPACE)
        service.controller.pod_stored("ADDED", stored)  # as the webhook's pod informer
    scout = cluster.get(PODS, "vqe-0", NAMESPACE)
    workers = [cluster.get(PODS, f"vqe-{i}", NAMESPACE) for i in (1, 2, 3)]
    groups = {g["metadata"]["name"]: g["spec"]["schedulingPolicy"]["gang"]["minCount"]
              for g in cluster.list(PODGROUPS, NAMESPACE).items}
    assert groups == {"vqe-scout": 1, "vqe": 3}
    assert scout["spec"]["schedulingGroup"] == {"podGroupName": "vqe-scout"}
    assert not scout["spec"].get("schedulingGates")
    assert [c["name"] for c in scout["spec"]["containers"]] == ["app", names.SIDECAR_CONTAINER]
    assert [c["name"] for c in scout["spec"]["initContainers"]] == [names.STAGE_CONTAINER]
    sidecar = by_name(scout, names.SIDECAR_CONTAINER)
    app = by_name(scout, "app")
    # The runtime volume: an emptyDir, mounted at the same path in stage, app and sidecar.
    assert {"name": names.RUNTIME_VOLUME, "emptyDir": {}} in scout["spec"]["volumes"]
    for container in (app, sidecar, by_name(scout, names.STAGE_CONTAINER, "initContainers")):
        assert {"name": names.RUNTIME_VOLUME, "mountPath": names.RUNTIME_MOUNT} in container[
            "volumeMounts"
        ]
    wiring = env_sources(sidecar)
    assert wiring[names.ENV_POD_UID] == "metadata.uid"
    assert wiring[names.ENV_POD_NAME] == "metadata.name"
    assert wiring[names.ENV_POD_NAMESPACE] == "metadata.namespace"
    assert wiring[names.ENV_RUNTIME_DIR] == names.RUNTIME_MOUNT
    assert names.SETTINGS_ENV_PREFIX + "QUANTUM_GATE" not in wiring  # Fluence ungates, not it
    assert wiring[names.ENV_REPORT_TOKEN_FILE] == (
        f"{names.REPORT_TOKEN_MOUNT}/{names.REPORT_TOKEN_FILE}")
    token = next(v for v in scout["spec"]["volumes"] if v["name"] == names.REPORT_TOKEN_VOLUME)
    assert token["projected"]["sources"][0]["serviceAccountToken"]["audience"] == (
        settings.hybrid.report_audience)
    assert wiring[names.ENV_BACKEND] == f"metadata.annotations['{names.BACKEND_ANNOTATION}']"
    assert env_sources(app)[names.ENV_POD_UID] == "metadata.uid"
    assert env_sources(app)[names.ENV_RUNTIME_DIR] == names.RUNTIME_MOUNT
    assert env_sources(app)["PYTHONPATH"].split(":")[0] == names.RUNTIME_MOUNT
    for worker in workers:
        assert worker["spec"]["schedulingGroup"] == {"podGroupName": "vqe"}
        assert worker["spec"]["schedulingGates"] == [{"name": GATE}]
        assert worker["spec"]["priorityClassName"] == names.QUANTUM_PRIORITY_CLASS
        assert worker["spec"]["priority"] == world["priority_class"]["value"] == 1000
        assert qpu not in worker["spec"]["containers"][0]["resources"]["requests"]
        env = env_sources(worker["spec"]["containers"][0])
        assert env[names.ENV_ROLE] == names.ROLE_WORKER
        for variable, annotation in ((names.ENV_SCOUT_JOB_ID, names.SCOUT_JOB_ID_ANNOTATION),
                                     (names.ENV_SCOUT_SESSION, names.SCOUT_SESSION_ANNOTATION),
                                     (names.ENV_SCOUT_STATUS, names.SCOUT_STATUS_ANNOTATION)):
            assert env[variable] == f"metadata.annotations['{annotation}']"

    # -- 2. the scheduler: the scout goes, the workers wait holding nothing -------------------
    scheduler = Scheduler(cluster, settings)
    scheduler.start()

    def cycle() -> list[Any]:
        scheduler.pump()
        results = scheduler.schedule_once()
        scheduler.pump()
        return results

    cycle()
    scout = cluster.get(PODS, "vqe-0", NAMESPACE)
    assert scout["spec"].get("nodeName")
    annotations = scout["metadata"]["annotations"]
    assert annotations[names.BACKEND_ANNOTATION] == "sim_qpu"
    assert annotations[names.attr_annotation("provider")] == "fake"
    assert all(
        cluster.get(PODS, f"vqe-{i}", NAMESPACE)["spec"].get("nodeName") is None for i in (1, 2, 3)
    )
    assert len(scheduler.matcher.allocations()) == 2  # the scout's compute + its qpu; no worker
    assert names.JOBIDS_ANNOTATION not in (cluster.get(PODGROUPS, "vqe", NAMESPACE)["metadata"]
                                           .get("annotations") or {})

    # -- 3. the sidecar, configured from what the webhook injected ---------------------------
    env = container_env(scout, names.SIDECAR_CONTAINER)  # the kubelet's view at container start
    assert env[names.ENV_POD_UID] == scout["metadata"]["uid"]
    assert env[names.ENV_BACKEND] == "sim_qpu" and env["FLUXION_PROVIDER"] == "fake"
    assert env["FLUXION_DEVICE_ARN"] == "arn:fake:device/sim"
    world["runtime"].mkdir()
    env[names.ENV_RUNTIME_DIR] = str(world["runtime"])  # the emptyDir behind names.RUNTIME_MOUNT
    sidecar_settings = sidecar_settings_from(monkeypatch, env)
    assert (sidecar_settings.pod.name, sidecar_settings.pod.namespace) == ("vqe-0", NAMESPACE)

    clock = VirtualClock()
    fake = FakeQueueProvider(clock, {scout["metadata"]["uid"]: FakeTask(
        "fake-task/0001", SCRIPT, session="session-42")})
    real = collect_providers(get_plugin_manager(sidecar_settings))
    # The reports applied in process, as Fluence (the webhook's settings) applies them.
    fluence = LocalReporter(cluster, NAMESPACE, "vqe-0", settings.hybrid.quantum_gate)
    sidecar = sidecar_from_env(sidecar_settings, fluence, [*real, fake], clock=clock)
    assert sidecar.provider is fake and sidecar.config.backend.name == "sim_qpu"

    timeline: list[str] = []
    bound_at: dict[str, float] = {}

    def on_sleep(now: float) -> None:
        """Between two polls: the scheduler runs; bound workers run and then finish."""
        for result in cycle():
            if result.placed:
                timeline.append(
                    f"t={now:g}s scheduler bound {result.group}: "
                    + ", ".join(f"{p.split('/')[1]}->{n}" for p, n in sorted(result.placed.items()))
                )
        for i in (1, 2, 3):
            pod = cluster.get(PODS, f"vqe-{i}", NAMESPACE)
            if pod["spec"].get("nodeName") and pod["metadata"]["name"] not in bound_at:
                bound_at[pod["metadata"]["name"]] = now
            elif pod["spec"].get("nodeName") and pod["status"].get("phase") == "Pending":
                cluster.patch_status(
                    PODS, pod["metadata"]["name"], {"status": {"phase": "Succeeded"}}, NAMESPACE
                )

    clock.on_sleep = on_sleep
    result = sidecar.run()
    for t, position in result.series:
        timeline.append(f"t={t:g}s vendor queue position {position}")
    timeline.append(
        f"t={result.series[-1][0]:g}s sidecar stamped job id/session and removed {GATE} "
        f"from {', '.join(sorted(result.ungated))}"
    )
    timeline.sort(key=lambda line: float(line[2:line.index("s ")]))
    with capsys.disabled():
        print("\nhybrid flow (virtual time):\n  " + "\n  ".join(timeline))

    # -- 4. the outcome -------------------------------------------------------------------------
    assert result.outcome is Outcome.READY and result.exit_code == 0
    assert sorted(result.ungated) == ["vqe-1", "vqe-2", "vqe-3"]
    assert [p for _, p in result.series] == [7, 4, 2, 1]
    ready_at = result.series[-1][0]
    assert ready_at == 70  # the first poll (every 10 s) after position 1 at t=62
    assert set(bound_at.values()) == {ready_at + 10}  # all 3 in one cycle, right after ungate
    bound = {cluster.get(PODS, f"vqe-{i}", NAMESPACE)["spec"]["nodeName"] for i in (1, 2, 3)}
    assert bound and None not in bound
    for i in (1, 2, 3):
        assert_released_worker(cluster.get(PODS, f"vqe-{i}", NAMESPACE))
    group = cluster.get(PODGROUPS, "vqe", NAMESPACE)
    assert names.JOBIDS_ANNOTATION in group["metadata"]["annotations"]  # one record for the 3
    assert result.workers_finished and (world["runtime"] / names.RELEASE_MARKER_FILE).exists()
    stamped_scout = cluster.get(PODS, "vqe-0", NAMESPACE)["metadata"]["annotations"]
    assert stamped_scout[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_READY
    # The workers finished: their allocation goes back and the record is cleared.
    cycle()
    assert names.JOBIDS_ANNOTATION not in (cluster.get(PODGROUPS, "vqe", NAMESPACE)["metadata"]
                                           .get("annotations") or {})
    assert len(scheduler.matcher.allocations()) == 2  # the scout's, still running


def installed_providers() -> list[Any]:
    """Every provider plugin installed here (none is required: they are optional)."""
    names_ = sorted(p.name for p in collect_providers(get_plugin_manager(load_settings())))
    return names_ or [pytest.param("none", marks=pytest.mark.skip(reason="no provider plugin"))]


@pytest.mark.parametrize("provider", installed_providers())
def test_the_injected_sidecar_env_resolves_an_installed_provider(
    world, monkeypatch, provider
) -> None:
    """`fluence sidecar` starts from the injected env: settings parse, the real provider resolves.
    """
    resources = world["runtime"].parent / "resources.yaml"
    resources.write_text(RESOURCES.replace("provider: fake", f"provider: {provider}"))
    settings, cluster, job = world["settings"], world["cluster"], world["job"]
    service = build_service(settings, get_plugin_manager(settings), cluster)
    for pod in indexed_job_pods(job)[:1]:
        stored = cluster.create(PODS, admit(service, pod), NAMESPACE)
        service.controller.pod_stored("ADDED", stored)  # as the webhook's pod informer
    scheduler = Scheduler(cluster, settings)
    scheduler.start()
    scheduler.schedule_once()
    scout = cluster.get(PODS, "vqe-0", NAMESPACE)
    assert scout["spec"].get("nodeName")
    env = container_env(scout, names.SIDECAR_CONTAINER)
    sidecar_settings = sidecar_settings_from(monkeypatch, env)
    sidecar = sidecar_from_env(
        sidecar_settings, cluster, collect_providers(get_plugin_manager(sidecar_settings))
    )
    assert sidecar.provider.name == provider
    assert sidecar.config.backend.name == "sim_qpu"
    assert sidecar.config.backend.attributes["region"] == "sim-1"
    assert (sidecar.config.pod_uid, sidecar.config.pod_name) == (scout["metadata"]["uid"], "vqe-0")


def test_container_env_resolves_the_downward_api_as_the_kubelet_does() -> None:
    from fluence_core.kube.downward import field_value
    from fluence_core.errors import FluenceError

    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "annotations": {"a/b": "x"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "env": [
                        {"name": "LIT", "value": "1"},
                        {
                            "name": "ANN",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['a/b']"}},
                        },
                        {
                            "name": "MISSING",
                            "valueFrom": {
                                "fieldRef": {"fieldPath": "metadata.annotations['nope']"}
                            },
                        },
                        {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                    ],
                }
            ]
        },
    }
    assert container_env(pod, "c") == {"LIT": "1", "ANN": "x", "MISSING": "", "UID": "u-1"}
    assert field_value(pod, "spec.nodeName") == ""
    with pytest.raises(FluenceError):
        field_value(pod, "status.podIPs")
    with pytest.raises(FluenceError):
        container_env(pod, "absent")


def assert_released_worker(worker: dict[str, Any]) -> None:
    """Ungated, stamped with the fake task's job id and session and the scout's backend, and
    its env reads them."""
    assert not worker["spec"].get("schedulingGates")
    stamped = worker["metadata"]["annotations"]
    assert stamped[names.SCOUT_JOB_ID_ANNOTATION] == "fake-task/0001"
    assert stamped[names.SCOUT_SESSION_ANNOTATION] == "session-42"
    assert stamped[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_READY
    # What the worker's container will read, through the env the webhook injected:
    seen = container_env(worker, "app")
    assert (seen[names.ENV_SCOUT_JOB_ID], seen[names.ENV_SCOUT_SESSION],
            seen[names.ENV_SCOUT_STATUS]) == ("fake-task/0001", "session-42", "ready")
    assert stamped[names.BACKEND_ANNOTATION] == "sim_qpu"
    assert (seen[names.ENV_BACKEND], seen["FLUXION_PROVIDER"], seen["FLUXION_REGION"],
            seen["FLUXION_DEVICE_ARN"]) == ("sim_qpu", "fake", "sim-1", "arn:fake:device/sim")
