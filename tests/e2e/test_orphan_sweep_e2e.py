"""The orphan sweep on a real kube-apiserver (skipped without KUBEBUILDER_ASSETS).

A shared hybrid Indexed Job goes through the webhook (the split is real); the
sweep runs in the webhook process as ``fluence webhook`` runs it, with a short
interval. While the scout lives the workers stay gated; once the scout fails
(its phase set through the status subresource, as a kubelet would; no kubelet
here) and the Job does not replace it (``backoffLimitPerIndex: 0``), the workers
are ungated as ``scout-lost`` with a ``ScoutLost`` Event each.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import Conflict
from fluence_core.kube.manifests import read_objects
from fluence_core.settings import Settings, load_settings
from fluence_core.testing import indexed_job_pods
from fluence_core.testing_apiserver import ApiServer, wait_for, webhook_beside
from fluence_core.hybrid.orphans import REASON, OrphanSweep
from tests.hybrid.case import RESOURCES

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
SWEEP = 0.3


def submit(kube: KubeCluster, ns: str, made_by_controller: bool) -> None:
    """The example shared Job of 4, whose failed index is never replaced; its pods made by the
    job controller when it runs, else as the controller would make them."""
    (job,) = read_objects(REPO / "examples" / "quantum-shared-job.yaml", kind="Job")
    job["spec"]["backoffLimitPerIndex"] = 0
    job["spec"]["template"]["spec"]["nodeSelector"] = {"e2e-ns": ns}
    job = kube.create("jobs", job, ns)
    if made_by_controller:
        wait_for(lambda: len(kube.list("pods", ns).items) == 4, "the job controller's 4 pods")
        return
    for pod in indexed_job_pods(job):
        kube.create("pods", pod, ns)


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def test_a_failed_scout_s_workers_are_released_as_scout_lost(
    apiserver: ApiServer, kube: KubeCluster, kube_namespace: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # admission control judges one cluster-wide budget, which the pending quantum pods the
    # session's earlier tests leave share with this Job (run after test_match_conditions on
    # its own node, the Job's pods were refused: 8 cores promised of 8); its marks, which
    # the sweep reads, stay (test_hybrid_flow_e2e.py::test_the_hybrid_flow_end_to_end judges
    # with it on)
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    ns = kube_namespace
    try:
        (priority_class,) = read_objects(REPO / "deploy" / "fluence.yaml", kind="PriorityClass")
        kube.create("priorityclasses", priority_class)
    except Conflict:
        pass
    resources = tmp_path / "resources.yaml"
    resources.write_text(RESOURCES)
    settings = load_settings(resources=resources, orphan_sweep=SWEEP,
                             webhook_config=f"fluence-orphans-{ns}")
    sweep = OrphanSweep(kube, settings)
    released_as_scout_lost(apiserver, kube, ns, settings, sweep, tmp_path)


def released_as_scout_lost(apiserver: ApiServer, kube: KubeCluster, ns: str, settings: Settings,
                           sweep: OrphanSweep, tmp_path: Path) -> None:
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                        resources=("pods", "jobs"), loops=[sweep]):
        submit(kube, ns, apiserver.controller_manager)
        pods = {p["metadata"]["labels"][names.JOB_COMPLETION_INDEX]: p
                for p in kube.list("pods", ns).items}
        scout = pods["0"]
        workers = [pods[i]["metadata"]["name"] for i in ("1", "2", "3")]
        assert scout["metadata"]["labels"][names.ROLE_LABEL] == names.ROLE_SCOUT

        time.sleep(10 * SWEEP)  # many sweeps: a live scout keeps its workers gated
        for name in workers:
            assert gates(kube.get("pods", name, ns)) == [names.QUANTUM_GATE]

        kube.patch_status("pods", scout["metadata"]["name"],
                          {"status": {"phase": "Failed"}}, ns)

        def released() -> list[dict[str, Any]] | None:
            now = [kube.get("pods", name, ns) for name in workers]
            return now if all(p is not None and not gates(p) for p in now) else None

        for pod in wait_for(released, "the workers released by the orphan sweep", timeout=30):
            notes = pod["metadata"]["annotations"]
            assert notes[names.SCOUT_STATUS_ANNOTATION] == names.SCOUT_STATUS_LOST
        events = wait_for(lambda: len(found := [
            e for e in kube.list("events", ns).items if e.get("reason") == REASON]) == 3
            and found, "a ScoutLost Event per worker")
        assert sorted(e["involvedObject"]["name"] for e in events) == sorted(workers)
        assert kube.get("pods", scout["metadata"]["name"], ns) is not None  # not replaced
        assert sweep.sweep() == []  # released: nothing left to do
