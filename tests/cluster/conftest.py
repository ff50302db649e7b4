"""Fixtures for the cluster tier: Fluence as users run it, on real kubelets on this machine.

The cluster (tests/cluster/local-cluster.sh) starts once per session and is torn
down after the last test. Where a binary, a tool or an image is missing every test
is skipped, naming what is missing, before anything starts.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import STATE, Cluster, script, why_not


TIER_TIMEOUT = 1200
"""Seconds for any test of the tier, whose last one also pays, in its teardown, for
`local-cluster.sh down` (pytest-timeout counts it): minutes on a busy machine, mostly
removing each node's unpacked images."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here gets :data:`TIER_TIMEOUT`, so whichever runs last can tear down."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.timeout(TIER_TIMEOUT))


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """Two kubelets with Fluence deployed from deploy/ (the local image); torn down after."""
    assets = Path(os.environ.get("KUBEBUILDER_ASSETS", "/usr/local/kubebuilder/bin"))
    if os.environ.get("FLUENCE_CLUSTER_RUNNING") == "1" and (STATE / "up").exists():
        # A contributor's cluster from `local-cluster.sh up load deploy`, left as it is.
        yield Cluster(STATE / "admin.kubeconfig", assets / "kubectl")
        return
    reason = why_not()
    if reason:
        pytest.skip(reason)
    # One local cluster per machine: its bridge, addresses and ports are fixed.
    with open(STATE / "tier.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.skip(f"another run of the cluster tier holds {STATE / 'tier.lock'}")
        try:
            script("up")
            script("load")
            script("deploy")
            yield Cluster(STATE / "admin.kubeconfig", assets / "kubectl")
        finally:
            script("down")
