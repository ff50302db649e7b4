"""The sidecar ungates real gated pods on a real kube-apiserver (``KUBEBUILDER_ASSETS``).

It runs on the suite's control plane (``conftest.py``), skipped with the reason when
the assets are not there. The vendor queue is the scripted fake and time is virtual;
everything Kubernetes is real: the JSON patch with its ``test`` op, the gate-removal
rule, annotations, status.
"""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core import names
from fluence_core.runtime.fake_provider import QUEUED, FakeQueueProvider, FakeTask
from fluence_core.runtime.provider import Backend
from fluence_core.hybrid.sidecar import Outcome, Sidecar, SidecarConfig, VirtualClock
from fluence_core.testing import job_owner, make_pod_dict

pytestmark = pytest.mark.e2e
OTHER_GATE = "example.com/other"


def _pod(name: str, gates: list[str], group: str = "qaoa", role: str | None = None,
         job: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod of the group; a split's (``role``) is controlled by ``job``, as the quantum
    split's pods are the pods of one Indexed Job."""
    labels = {names.GROUP_LABEL: group, **({names.ROLE_LABEL: role} if role else {})}
    owners = None if job is None else [job_owner(job["metadata"]["name"], job["metadata"]["uid"])]
    return make_pod_dict(name, None, namespace=None, labels=labels, gates=gates, owners=owners,
                         image="python:3.11")


def test_sidecar_ungates_real_gated_pods_at_the_right_moment(kube, kube_namespace,
                                                             tmp_path) -> None:
    namespace = kube_namespace
    job = kube.create("jobs", {  # suspended: its pods are these, made by the test
        "metadata": {"name": "qaoa"},
        "spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "app", "image": "busybox"}]}}}},
        namespace)
    kube.create("pods", _pod("scout", [], role=names.ROLE_SCOUT, job=job), namespace)
    scout_uid = kube.get("pods", "scout", namespace)["metadata"]["uid"]
    kube.create("pods", _pod("worker-1", [OTHER_GATE, names.QUANTUM_GATE],
                             role=names.ROLE_WORKER, job=job), namespace)
    kube.create("pods", _pod("worker-2", [names.QUANTUM_GATE], role=names.ROLE_WORKER, job=job),
                namespace)
    kube.create("pods", _pod("stranger", [names.QUANTUM_GATE], group="other"), namespace)

    clock = VirtualClock()
    provider = FakeQueueProvider(
        clock,
        {
            scout_uid: FakeTask(
                "arn:aws:braket:us-east-1:123456789012:quantum-task/e2e",
                [(0, 12, QUEUED), (30, 2, QUEUED), (60, 1, QUEUED)],
            )
        },
    )
    gated_before: dict[float, bool] = {}

    def step(now: float) -> None:
        worker = kube.get("pods", "worker-2", namespace)
        gated_before[now] = bool(worker["spec"].get("schedulingGates"))
        if now == 90:
            for name in ("worker-1", "worker-2"):
                kube.patch_status("pods", name, {"status": {"phase": "Succeeded"}}, namespace)

    clock.on_sleep = step
    config = SidecarConfig("scout", namespace, scout_uid,
                           Backend("rigetti_cepheus", {"provider": "fake"}), runtime_dir=tmp_path)
    result = Sidecar(kube, provider, config, clock).run()

    assert result.outcome is Outcome.READY and sorted(result.ungated) == ["worker-1", "worker-2"]
    assert gated_before[60] is True and gated_before[70] is False  # released by the poll at t=60
    w1, w2, stranger = (
        kube.get("pods", n, namespace) for n in ("worker-1", "worker-2", "stranger")
    )
    assert [g["name"] for g in w1["spec"]["schedulingGates"]] == [OTHER_GATE]
    assert not w2["spec"].get("schedulingGates")
    assert [g["name"] for g in stranger["spec"]["schedulingGates"]] == [names.QUANTUM_GATE]
    for pod in (w1, w2):
        annotations = pod["metadata"]["annotations"]
        assert annotations[names.SCOUT_JOB_ID_ANNOTATION].endswith("quantum-task/e2e")
        assert annotations[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_READY
    assert result.workers_finished and (tmp_path / names.RELEASE_MARKER_FILE).exists()
