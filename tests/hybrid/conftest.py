"""A scout with gated workers in the in-memory cluster, and a virtual clock."""

from __future__ import annotations

import pytest

from fluence_core import names
from fluence_core.hybrid.sidecar import VirtualClock
from fluence_core.kube.fake import FakeCluster

from .scouts import OTHER_GATE, pod


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
