"""One tenant's burst of pods that cannot fit, and another tenant's pod, on a real API server.

The scheduler runs as ``fluence up`` runs it: its own client at the default limits
(50 QPS, burst 100) and binding on its pool. Tenant A's pods ask for more CPUs than
the one node of the test has; they are created before the scheduler starts, so its
first cycle meets all of them. Tenant B's pod, created as the scheduler starts, fits.
It used to wait for the first pass over the burst to end, which paid for one
``PodScheduled=False`` patch per pod out of that budget: 600 pods, 10 s and more.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import ApiServer, ensure_namespace, scheduler_beside, wait_for

pytestmark = pytest.mark.e2e

BURST = 600
"""Tenant A's pods: 500 past the budget's burst of 100 take the old cycle 10 s."""
PROMPTLY = 4.0
"""Seconds within which tenant B's pod is bound: well under the old 10 s, with room for
a loaded machine."""

_tenants = itertools.count()


def _in_parallel(action: Any, items: list[Any]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(action, items))


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


class Tenants:
    """Tenant A (the test's namespace, with the test's one node) and tenant B."""

    def __init__(self, kube: KubeCluster, namespace: str) -> None:
        self.kube = kube
        self.a = namespace
        self.b = ensure_namespace(kube, f"{namespace}-b{next(_tenants)}")
        self.selector = {"e2e-ns": namespace}
        kube.create("nodes", make_node_dict(f"{namespace}-n0", 4, labels=self.selector,
                                            capacity=True))

    def pod(self, name: str, cpu: str, namespace: str) -> dict[str, Any]:
        return make_pod_dict(name, cpu, namespace=namespace, nodeSelector=self.selector)

    def burst(self, count: int) -> None:
        """``count`` pods of tenant A that no node can take."""
        pods = [self.pod(f"burst-{i}", "64", self.a) for i in range(count)]
        _in_parallel(lambda p: self.kube.create("pods", p, self.a), pods)

    def bound(self, name: str, namespace: str) -> bool:
        return bool(((self.kube.get("pods", name, namespace) or {}).get("spec") or {})
                    .get("nodeName"))

    def clear(self) -> None:
        """Delete both tenants' pods, so no later test's scheduler meets the burst."""
        for namespace in (self.a, self.b):
            names = [p["metadata"]["name"] for p in self.kube.list("pods", namespace).items]
            _in_parallel(lambda n, ns=namespace: self.kube.delete(
                "pods", n, ns, grace_period_seconds=0), names)
        self.kube.delete("nodes", f"{self.a}-n0")


@pytest.fixture
def tenants(kube: KubeCluster, kube_namespace: str) -> Iterator[Tenants]:
    made = Tenants(kube, kube_namespace)
    try:
        yield made
    finally:
        made.clear()


@pytest.fixture
def scheduler_client(apiserver: ApiServer) -> Iterator[KubeCluster]:
    """The scheduler's own client, at ``fluence up``'s default limits."""
    settings = load_settings()
    client = apiserver.cluster(qps=settings.kube.qps, burst=settings.kube.burst)
    yield client
    client.close()


def test_another_tenants_pod_is_bound_promptly_behind_a_burst_that_cannot_fit(
        tenants: Tenants, scheduler_client: KubeCluster) -> None:
    tenants.burst(BURST)
    settings = load_settings()
    with scheduler_beside(scheduler_client, settings, bind_workers=settings.scheduling.bind_pool):
        tenants.kube.create("pods", tenants.pod("small", "1", tenants.b), tenants.b)
        wait_for(lambda: tenants.bound("small", tenants.b),
                 f"tenant B's pod bound behind {BURST} pods that cannot fit", timeout=PROMPTLY,
                 every=0.05)


def test_every_pod_of_the_burst_is_still_told_why_it_waits(
        tenants: Tenants, scheduler_client: KubeCluster) -> None:
    tenants.burst(200)
    settings = load_settings()
    with scheduler_beside(scheduler_client, settings, bind_workers=settings.scheduling.bind_pool):
        tenants.kube.create("pods", tenants.pod("small", "1", tenants.b), tenants.b)
        wait_for(lambda: tenants.bound("small", tenants.b), "tenant B's pod bound")
        wait_for(lambda: all(_unschedulable(p)
                             for p in tenants.kube.list("pods", tenants.a).items),
                 "PodScheduled=False on every pod of the burst", every=1.0)
