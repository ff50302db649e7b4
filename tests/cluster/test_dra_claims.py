"""A QPU asked for by a ResourceClaim on real kubelets: allocated, prepared, handed over by CDI.

deploy/ runs the QPU DRA driver (the resources file's backends as network-attached
devices) and its kubelet plugin on every node. A pod names a claim of the driver's
DeviceClass with a CEL selector over the file's attributes; the scheduler allocates
the claim (``status.allocation``, written by whoever placed the pod), the kubelet asks
the plugin to prepare it, the plugin writes a CDI spec into the node's /var/run/cdi and
containerd puts its environment into the container. No webhook is involved: the pod
as stored carries no FLUXION_ variable. Under Fluence and under kube-scheduler alike;
and the Braket QAOA example on its local simulator, its backend named by the claim.

Needs a containerd with CDI (1.7 or later: ``CONTAINERD_BIN``); skipped, saying so,
without. ``pytest -s`` shows what each pod printed and each claim's allocation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from fluence_core import names

from tests.cluster.harness import (
    BRAKET_ARCHIVE,
    IMAGES,
    REPO,
    STATE,
    WORKLOAD_IMAGE,
    Cluster,
    is_ready,
    list_pods,
    wait,
    why_no_cdi,
)

SYSTEM = "fluence-system"
PLUGIN = "fluence-qpu-kubelet-plugin"
DRIVER_DEPLOYMENT = "fluence-qpu-driver"
FILE = names.RESOURCE_DOMAIN
"""The domain of the resources file's attributes on each device."""
WEST = f'device.attributes["{FILE}"].region == "us-west-1"'
"""deploy/fluence-resources.yaml's one backend, rigetti_cepheus, is in us-west-1."""
LOCAL_SIMULATOR = (f'"local_simulator" in device.attributes["{FILE}"] && '
                   f'device.attributes["{FILE}"].local_simulator == "braket_sv"')
"""Guarded: a selector reading an attribute a device lacks is an error, not false, under
Fluence as under kube-scheduler, and the class's other qpu (rigetti_cepheus) has none."""
BRAKET_IMAGE = "ghcr.io/flux-framework/fluence-example-braket-qaoa:0.1.0"
DONE = "--- done"
"""What a claim pod prints once its work is over; it then sleeps, so its claim stays
allocated and prepared while the test reads them."""
SPEC_PREFIX = "fluence-qpu-"


@dataclass
class ClaimRun:
    """What one claim pod showed while it ran."""

    node: str
    lines: list[str]
    allocation: dict[str, Any]
    allocated_by: list[str]
    reserved_for: list[str]
    cdi_spec: dict[str, Any]
    pod: dict[str, Any]


def _slice_devices(cluster: Cluster) -> dict[str, str]:
    """The driver's published devices: name -> backend."""
    found: dict[str, str] = {}
    for piece in cluster.get("resourceslices")["items"]:
        if piece["spec"].get("driver") != names.QPU_DRA_DRIVER:
            continue
        for device in piece["spec"].get("devices") or []:
            backend = device["attributes"].get("backend", {}).get("string", "")
            found[device["name"]] = backend
    return found


def _plugins_registered(cluster: Cluster) -> bool:
    pods = list_pods(cluster, SYSTEM, "-l", f"app.kubernetes.io/name={PLUGIN}")
    return len(pods) == 2 and all(
        is_ready(p) and "registered with the kubelet" in cluster.run(
            "-n", SYSTEM, "logs", p["metadata"]["name"], check=False).stdout for p in pods)


@pytest.fixture(scope="module")
def qpu(cluster: Cluster) -> Cluster:
    """The cluster once its containerd can hand CDI devices over, the kubelet plugin is
    registered with both kubelets and the driver has published the deployed backend."""
    reason = why_no_cdi()
    if reason:
        pytest.skip(reason)
    wait(lambda: _plugins_registered(cluster),
         "the QPU kubelet plugin to register with both kubelets", timeout=180)
    devices = wait(lambda: (d := _slice_devices(cluster)) and "rigetti_cepheus" in d.values()
                   and d, "the driver to publish rigetti_cepheus", timeout=180)
    print(f"\nthe driver publishes {len(devices)} devices, among them "
          f"{sorted(n for n in devices if 'qubit' not in n)}")
    return cluster


def _claim(name: str, *selectors: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "qpu", "exactly": {
                "deviceClassName": names.QPU_DEVICE_CLASS,
                "selectors": [{"cel": {"expression": e}} for e in selectors]}}]}}}


def _claim_pod(name: str, scheduler: str, claim: str, image: str, script: str,
               cpu: str = "10m", memory: str = "32Mi") -> dict[str, Any]:
    """A pod whose one container uses the claim (only a container naming it under
    ``resources.claims`` gets the claim's CDI devices) and runs ``script``, then says
    :data:`DONE` and waits."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                     "terminationGracePeriodSeconds": 1,
                     "resourceClaims": [{"name": "qpu", "resourceClaimName": claim}],
                     "containers": [{
                         "name": "app", "image": image,
                         "command": ["sh", "-c", f"{script}\necho '{DONE}'\nexec sleep 600"],
                         "resources": {"requests": {"cpu": cpu, "memory": memory},
                                       "claims": [{"name": "qpu"}]}}]}}


def _allocation_managers(claim: dict[str, Any]) -> list[str]:
    """Who wrote the claim's ``status.allocation``, from its managedFields."""
    return sorted({entry["manager"] for entry in claim["metadata"].get("managedFields") or []
                   if entry.get("subresource") == "status"
                   and "f:allocation" in (entry.get("fieldsV1") or {}).get("f:status", {})})


@contextmanager
def _run(cluster: Cluster, prefix: str, scheduler: str, selector: str, image: str,
         script: str, timeout: float = 240, **requests: str) -> Iterator[ClaimRun]:
    """Run one claim pod to :data:`DONE`, give what it showed, then delete it and wait for
    the kubelet plugin to unprepare the claim (its CDI spec gone) and the claim to be
    released (no allocation), so the backend is free for the next test."""
    namespace = cluster.namespace(prefix)
    cluster.apply(yaml.safe_dump(_claim("qpu", selector)), namespace)
    cluster.apply(yaml.safe_dump(_claim_pod("app", scheduler, "qpu", image, script,
                                            **requests)), namespace)

    def finished() -> list[str] | None:
        pod = cluster.get("-n", namespace, "pod", "app")
        if pod["status"].get("phase") in ("Failed", "Succeeded"):
            raise AssertionError(f"pod app ended {pod['status']['phase']}: "
                                 f"{cluster.logs(namespace, 'app')}")
        lines = cluster.run("-n", namespace, "logs", "app", check=False).stdout.splitlines()
        return lines if DONE in lines else None

    try:
        lines = wait(finished, f"pod {namespace}/app to print {DONE!r}", timeout=timeout,
                     every=2)
        pod = cluster.get("-n", namespace, "pod", "app")
        claim = cluster.get("-n", namespace, "resourceclaim", "qpu", "--show-managed-fields")
        uid = claim["metadata"]["uid"]
        spec_file = STATE / pod["spec"]["nodeName"] / "cdi" / f"{SPEC_PREFIX}{uid}.json"
        yield ClaimRun(
            node=pod["spec"]["nodeName"], lines=lines[:lines.index(DONE)],
            allocation=claim["status"].get("allocation") or {},
            allocated_by=_allocation_managers(claim),
            reserved_for=[r["name"] for r in claim["status"].get("reservedFor") or []],
            cdi_spec=json.loads(spec_file.read_text()) if spec_file.is_file() else {},
            pod=pod)
        cluster.run("-n", namespace, "delete", "pod", "app", "--timeout=120s", timeout=150)
        wait(lambda: not spec_file.exists(), f"the plugin to remove {spec_file}", timeout=120)
        wait(lambda: not cluster.get("-n", namespace, "resourceclaim", "qpu")["status"].get(
            "allocation"), f"claim {namespace}/qpu to be released", timeout=120)
        print(f"  after the pod: {spec_file.name} removed, the claim released")
    finally:
        cluster.run("delete", "namespace", namespace, "--wait=false", check=False)


def _show(run: ClaimRun, scheduler: str) -> None:
    print(f"\npod under {scheduler} on {run.node} printed:")
    for line in run.lines:
        print(f"  {line}")
    print(f"claim status.allocation: {json.dumps(run.allocation)}")
    print(f"  written by: {run.allocated_by}; reservedFor: {run.reserved_for}")
    print(f"CDI spec on {run.node}: {json.dumps(run.cdi_spec)}")


def _check(run: ClaimRun, backend: str, manager: str) -> list[str]:
    """What every claim pod must show; the device allocated, as ``pool/device``."""
    results = run.allocation["devices"]["results"]
    assert [(r["request"], r["driver"]) for r in results] == [("qpu", names.QPU_DRA_DRIVER)]
    assert run.allocated_by == [manager]
    assert run.reserved_for == ["app"]
    # the variables came from the kubelet plugin's CDI spec, not from the pod spec
    assert f"{names.ENV_BACKEND}={backend}" in run.lines
    container = run.pod["spec"]["containers"][0]
    assert not [e for e in container.get("env") or [] if e["name"].startswith("FLUXION_")]
    assert not container.get("envFrom")
    (device,) = run.cdi_spec["devices"]
    assert run.cdi_spec["kind"] == names.QPU_CDI_KIND
    assert f"{names.ENV_BACKEND}={backend}" in device["containerEdits"]["env"]
    return [f"{r['pool']}/{r['device']}" for r in results]


ENV_SCRIPT = "env | grep '^FLUXION_' | sort"


def test_fluence_allocates_a_qpu_claim_and_the_container_gets_its_backend_through_cdi(
        qpu: Cluster) -> None:
    with _run(qpu, "claim-fluence", names.SCHEDULER_NAME, WEST, WORKLOAD_IMAGE,
                    ENV_SCRIPT) as run:
        _show(run, "fluence")
        assert _check(run, "rigetti_cepheus", "fluence") == ["cluster/rigetti-cepheus0-qpu0"]
        assert {"FLUXION_PROVIDER=braket", "FLUXION_REGION=us-west-1"} <= set(run.lines)
        binder = [e.get("reportingComponent") or e["source"].get("component")
                  for e in qpu.get("-n", run.pod["metadata"]["namespace"], "events")["items"]
                  if e["reason"] == "Scheduled"]
        print(f"  Scheduled by: {binder}")
        assert binder == [names.SCHEDULER_NAME]


def test_kube_scheduler_allocates_the_same_claim_and_the_same_plugin_prepares_it(
        qpu: Cluster) -> None:
    with _run(qpu, "claim-kube", "default-scheduler", WEST, WORKLOAD_IMAGE,
                    ENV_SCRIPT) as run:
        _show(run, "kube-scheduler")
        assert _check(run, "rigetti_cepheus", "kube-scheduler") == [
            "cluster/rigetti-cepheus0-qpu0"]
        assert {"FLUXION_PROVIDER=braket", "FLUXION_REGION=us-west-1"} <= set(run.lines)


@pytest.fixture
def local_simulator(qpu: Cluster) -> Iterator[Cluster]:
    """The deployed resources file plus config/resources-local.yaml's ``braket_local``; the
    driver and the kubelet plugins restarted to read it at once (a ConfigMap edit reaches a
    running pod only with the kubelet's next sync); the original put back after."""
    original = qpu.get("-n", SYSTEM, "configmap", "fluence-resources")
    config = yaml.safe_load(original["data"]["resources.yaml"])
    local = yaml.safe_load((REPO / "config" / "resources-local.yaml").read_text())
    config["resources"].append(next(r for r in local["resources"]
                                    if r["name"] == "braket_local"))

    def use(data: dict[str, str]) -> None:
        current = qpu.get("-n", SYSTEM, "configmap", "fluence-resources")
        qpu.run("replace", "-f", "-", input=json.dumps({**current, "data": data}))
        for kind, name in (("deployment", DRIVER_DEPLOYMENT), ("daemonset", PLUGIN)):
            qpu.run("-n", SYSTEM, "rollout", "restart", f"{kind}/{name}")
        for kind, name in (("deployment", DRIVER_DEPLOYMENT), ("daemonset", PLUGIN)):
            qpu.run("-n", SYSTEM, "rollout", "status", f"{kind}/{name}", "--timeout=180s",
                    timeout=200)
        wait(lambda: _plugins_registered(qpu), "the restarted plugins to register",
             timeout=180)

    use({"resources.yaml": yaml.safe_dump(config)})
    try:
        wait(lambda: "braket_local" in _slice_devices(qpu).values(),
             "the driver to publish braket_local", timeout=120)
        yield qpu
    finally:
        use(original["data"])


def test_the_braket_example_runs_on_its_local_simulator_through_a_claim(
        local_simulator: Cluster) -> None:
    if not (IMAGES / BRAKET_ARCHIVE).is_file():
        pytest.skip(f"the QAOA example's image is not built ({IMAGES / BRAKET_ARCHIVE}: "
                    "tests/cluster/images.sh braket archives)")
    script = ("echo FLUXION_BACKEND=$FLUXION_BACKEND\n"
              "echo FLUXION_LOCAL_SIMULATOR=$FLUXION_LOCAL_SIMULATOR\n"
              "python /app/app.py 2>&1; echo \"exit $?\"")
    with _run(local_simulator, "claim-qaoa", names.SCHEDULER_NAME, LOCAL_SIMULATOR,
                    BRAKET_IMAGE, script, timeout=360, cpu="200m", memory="512Mi") as run:
        _show(run, "fluence")
        assert _check(run, "braket_local", "fluence") == ["cluster/braket-local0"]
        assert "FLUXION_LOCAL_SIMULATOR=braket_sv" in run.lines
        assert "no AWS credentials: running on the Braket local simulator" in run.lines
        assert run.lines[-1] == "exit 0"
        reports = [json.loads(line) for line in run.lines if line.startswith("{")]
        scout, result = reports
        assert (scout["role"], scout["backend"]) == ("scout", "braket_local")
        # max-cut of the example's 4-node, 5-edge graph: an expectation between 0 and 4
        assert 0 < result["expected_cut"] <= 4 and result["cut"] == 4
