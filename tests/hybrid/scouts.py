"""The pods of a split group, built and read back: what the hybrid tests share.

Two shapes of one group: :func:`split_member` is a member of an Indexed Job as the
split made it (a scout with or without the injected sidecar, gated workers), for
the report endpoint and the orphan sweep; :func:`pod` is one of
:func:`~fluence_core.testing.make_split_pod`'s, for the sidecar.
"""

from __future__ import annotations

from typing import Any

from fluence_core import names
from fluence_core.hybrid.sidecar import SidecarConfig
from fluence_core.kube.fake import FakeCluster
from fluence_core.runtime.provider import Backend
from fluence_core.testing import job_owner, make_pod_dict, make_split_pod

GROUP = "qaoa"
OTHER_GATE = "example.com/other"
GATE = names.QUANTUM_GATE
JOB = [job_owner("qj", "job-uid")]


def pod(
    name: str, *, gates: list[str] = (), role: str | None = None, group: str = GROUP
) -> dict[str, Any]:  # type: ignore[assignment]
    """A pod of the group; the split's (with a role) are the pods of one Indexed Job."""
    return make_split_pod(name, group, role, gates=gates, image="python:3.11")


def split_member(name: str, role: str, *, gated: bool = False, sidecar: bool = False,
                 account: str | None = None, group: str = "qj",
                 owners: Any = JOB) -> dict[str, Any]:
    """A pod of Job ``qj``'s group as the split makes it: a scout carries the backend
    annotations (and, with ``sidecar``, Fluence's sidecar container); a ``gated`` worker
    waits behind another gate and the quantum gate."""
    scout = role == names.ROLE_SCOUT
    return make_pod_dict(
        name, None, labels={names.GROUP_LABEL: group, names.ROLE_LABEL: role},
        annotations={names.BACKEND_ANNOTATION: "sim_qpu",
                     names.attr_annotation("provider"): "fake"} if scout else None,
        gates=["example.org/other", GATE] if gated else (), image="python:3.12", owners=owners,
        more_containers=[{"name": names.SIDECAR_CONTAINER, "image": "fluence"}] if sidecar else (),
        **({"serviceAccountName": account} if account else {}))


def job_qj() -> FakeCluster:
    """An in-memory cluster holding Job ``qj``'s split: scout ``qj-0`` with its sidecar,
    and workers ``qj-1`` and ``qj-2`` gated."""
    fake = FakeCluster()
    fake.create("pods", split_member("qj-0", names.ROLE_SCOUT, sidecar=True))
    for name in ("qj-1", "qj-2"):
        fake.create("pods", split_member(name, names.ROLE_WORKER, gated=True))
    return fake


def config(tmp_path: Any, **overrides: Any) -> SidecarConfig:
    """The scout's sidecar settings, with ``overrides``."""
    values: dict[str, Any] = dict(
        pod_name="scout", namespace="default", pod_uid="scout-uid",
        backend=Backend("sim_qpu", {"provider": "fake", "backend": "sim_qpu"}),
        poll_interval=10.0, ungate_position=1, find_timeout=60.0, worker_timeout=0.0,
        runtime_dir=tmp_path / "runtime",
    )
    values.update(overrides)
    return SidecarConfig(**values)


def stored(cluster: FakeCluster, name: str) -> dict[str, Any]:
    """Pod ``name`` of namespace ``default`` as the cluster holds it now."""
    found = cluster.get("pods", name, "default")
    assert found is not None
    return found


def gates(cluster: FakeCluster, name: str) -> list[str]:
    """The names of the pod's scheduling gates, in order."""
    return [g["name"] for g in stored(cluster, name)["spec"].get("schedulingGates") or []]


def annotations(cluster: FakeCluster, name: str) -> dict[str, str]:
    """The pod's annotations."""
    return stored(cluster, name)["metadata"].get("annotations") or {}


def finish(cluster: FakeCluster, *pods: str, phase: str = "Succeeded") -> None:
    """The pods end in ``phase``."""
    for name in pods:
        cluster.patch_status("pods", name, {"status": {"phase": phase}}, "default")
