"""Issue 32, attacks 3 and 4: a scout is its workers' sibling, one Job's pods by uid.

A bare pod a tenant labelled ``role=scout`` and ``group=vqe``, with a container named
like the sidecar and a projected token bound to it, released Job vqe's workers and
stamped them ``backend: evil_backend``; a scout with no controller matched every worker
of its group. And removing the role label from a live scout made the orphan sweep
release its workers as ``scout-lost`` while the scout still held the QPU.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import Settings
from fluence_core.hybrid.orphans import OrphanSweep
from fluence_core.hybrid.endpoint import ReportEndpoint
from fluence_core.testing import job_owner, make_pod_dict

GATE = names.QUANTUM_GATE
VQE = job_owner("vqe", "vqe-uid")
SIDECAR = {"name": names.SIDECAR_CONTAINER, "image": "fluence"}


def _pod(name: str, role: str, *, owner: dict[str, Any] | None = VQE, sidecar: bool = False,
         gated: bool = False, backend: str | None = None) -> dict[str, Any]:
    """A pod of group vqe in ``role``, controlled by ``owner`` (None: a bare pod)."""
    labels = {names.GROUP_LABEL: "vqe", names.ROLE_LABEL: role,
              **({names.JOB_UID_LABEL: owner["uid"]} if owner is not None else {})}
    return make_pod_dict(
        name, None, labels=labels, image="python:3.12", gates=[GATE] if gated else (),
        annotations={names.BACKEND_ANNOTATION: backend} if backend else None,
        owners=None if owner is None else [owner],
        more_containers=[SIDECAR] if sidecar else ())


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.create("pods", _pod("vqe-0", names.ROLE_SCOUT, sidecar=True, backend="real_qpu"))
    for name in ("vqe-1", "vqe-2"):
        fake.create("pods", _pod(name, names.ROLE_WORKER, gated=True))
    return fake


def _gated(cluster: FakeCluster, name: str) -> bool:
    found = cluster.get("pods", name, "default") or {}
    return any(g.get("name") == GATE for g in found["spec"].get("schedulingGates") or [])


def test_a_bare_pod_dressed_as_the_scout_releases_no_worker(cluster: FakeCluster) -> None:
    fake = cluster.create("pods", _pod("evil", names.ROLE_SCOUT, owner=None, sidecar=True,
                                       backend="evil_backend"))
    settings = Settings()
    token = cluster.issue_token(fake, settings.hybrid.report_audience)
    body = json.dumps({"event": names.REPORT_RELEASE, "status": names.SCOUT_STATUS_READY,
                       "jobId": "evil"}).encode()
    reply = ReportEndpoint(cluster, settings).handle(f"Bearer {token}", body)
    assert reply.status == 403, reply.body
    assert _gated(cluster, "vqe-1") and _gated(cluster, "vqe-2")
    for name in ("vqe-1", "vqe-2"):
        notes = (cluster.get("pods", name, "default") or {})["metadata"].get("annotations")
        assert names.BACKEND_ANNOTATION not in (notes or {})


def test_a_scout_of_another_job_releases_only_its_own_jobs_workers(cluster: FakeCluster) -> None:
    other = {**VQE, "name": "vqe-b", "uid": "other-uid"}
    scout = cluster.create("pods", _pod("b-0", names.ROLE_SCOUT, owner=other, sidecar=True))
    settings = Settings()
    token = cluster.issue_token(scout, settings.hybrid.report_audience)
    body = json.dumps({"event": names.REPORT_RELEASE,
                       "status": names.SCOUT_STATUS_READY}).encode()
    reply = ReportEndpoint(cluster, settings).handle(f"Bearer {token}", body)
    assert reply.status == 200 and reply.body["ungated"] == []
    assert _gated(cluster, "vqe-1") and _gated(cluster, "vqe-2")


def test_the_sweep_leaves_workers_whose_scout_lost_its_label_but_still_runs(
        cluster: FakeCluster) -> None:
    cluster.patch("pods", "vqe-0", {"metadata": {"labels": {names.ROLE_LABEL: None}}},
                  "default")
    sweep = OrphanSweep(cluster, Settings())
    assert sweep.sweep() == [] and sweep.sweep() == []  # suspected twice, then checked
    assert _gated(cluster, "vqe-1") and _gated(cluster, "vqe-2")


def test_the_sweep_never_releases_workers_no_job_controls(cluster: FakeCluster) -> None:
    for name in ("bare-1", "bare-2"):
        cluster.create("pods", _pod(name, names.ROLE_WORKER, owner=None, gated=True))
    sweep = OrphanSweep(cluster, Settings())
    assert sweep.sweep() == [] and sweep.sweep() == []
    assert _gated(cluster, "bare-1") and _gated(cluster, "bare-2")
