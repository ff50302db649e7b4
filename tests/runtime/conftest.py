"""A scout with gated workers in the in-memory cluster, and a virtual clock."""

from __future__ import annotations

import subprocess
import sysconfig
import venv
from pathlib import Path
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.runtime.provider import Backend
from fluence_core.hybrid.sidecar import SidecarConfig, VirtualClock
from fluence_core.testing import make_split_pod

GROUP = "qaoa"
OTHER_GATE = "example.com/other"


def pod(
    name: str, *, gates: list[str] = (), role: str | None = None, group: str = GROUP
) -> dict[str, Any]:  # type: ignore[assignment]
    """A pod of the group; the split's (with a role) are the pods of one Indexed Job."""
    return make_split_pod(name, group, role, gates=gates, image="python:3.11")


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.create("pods", pod("scout", role=names.ROLE_SCOUT))
    fake.create(
        "pods", pod("worker-1", gates=[OTHER_GATE, names.QUANTUM_GATE], role=names.ROLE_WORKER)
    )
    fake.create("pods", pod("worker-2", gates=[names.QUANTUM_GATE], role=names.ROLE_WORKER))
    fake.create("pods", pod("stranger", gates=[names.QUANTUM_GATE], group="other"))
    return fake


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def config(tmp_path: Any, **overrides: Any) -> SidecarConfig:
    values: dict[str, Any] = dict(
        pod_name="scout", namespace="default", pod_uid="scout-uid",
        backend=Backend("sim_qpu", {"provider": "fake", "backend": "sim_qpu"}),
        poll_interval=10.0, ungate_position=1, find_timeout=60.0, worker_timeout=0.0,
        runtime_dir=tmp_path / "runtime",
    )
    values.update(overrides)
    return SidecarConfig(**values)


def gates(cluster: FakeCluster, name: str) -> list[str]:
    found = cluster.get("pods", name, "default")
    assert found is not None
    return [g["name"] for g in found["spec"].get("schedulingGates") or []]


def annotations(cluster: FakeCluster, name: str) -> dict[str, str]:
    found = cluster.get("pods", name, "default")
    assert found is not None
    return found["metadata"].get("annotations") or {}


def finish(cluster: FakeCluster, *pods: str, phase: str = "Succeeded") -> None:
    for name in pods:
        cluster.patch_status("pods", name, {"status": {"phase": phase}}, "default")


@pytest.fixture(scope="session")
def clean_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A brand-new venv's python that sees the vendor SDKs (a ``.pth`` line pointing at this
    venv's site-packages, which does not run their own ``.pth`` hooks, so Fluence itself is
    *not* importable): a user's container, with nothing of Fluence but what is staged."""
    root = tmp_path_factory.mktemp("clean-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = Path(
        subprocess.check_output(
            [
                str(root / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            text=True,
        ).strip()
    )
    (site / "vendor-sdk.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root / "bin" / "python"
