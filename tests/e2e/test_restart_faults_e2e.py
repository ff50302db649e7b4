"""The fault-injection harness of ``tests/scheduler/test_restart_faults.py`` on a real API server.

The same gangs (``a``: 4x2 cores, ``b``: 2x2 + 1x1 cores, ``c``: 3x2 cores
waiting) on 4 nodes of 4 cores. An uninterrupted scheduler's writes are listed
first; then, for every write, a fresh namespace and nodes, a scheduler killed
just before that write, a restarted one, and the invariants; then ``a``
finishes and ``c`` must be placed whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import ensure_namespace
from tests.scheduler.faults import Faulty, Killed, check_invariants

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("clean_env")]

GANGS = {"a": ["2", "2", "2", "2"], "b": ["2", "2", "1"], "c": ["2", "2", "2"]}


class Scoped:
    """A cluster whose listings and watches show one namespace's pods and PodGroups and the
    nodes labelled for it: the scheduler under test leaves other tests' objects alone."""

    def __init__(self, inner: Any, namespace: str) -> None:
        self._inner = inner
        self._ns = namespace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _scope(self, resource: Any, namespace: str | None, kwargs: dict[str, Any]) -> str | None:
        if getattr(resource, "plural", resource) == "nodes":
            kwargs.setdefault("label_selector", f"e2e-ns={self._ns}")
            return namespace
        return namespace or self._ns

    def list(self, resource: Any, namespace: str | None = None, **kwargs: Any) -> Any:
        return self._inner.list(resource, self._scope(resource, namespace, kwargs), **kwargs)

    def watch(self, resource: Any, namespace: str | None = None, **kwargs: Any) -> Any:
        return self._inner.watch(resource, self._scope(resource, namespace, kwargs), **kwargs)


class Space:
    """One namespace with its own four nodes and the three gangs."""

    def __init__(self, kube: KubeCluster, name: str) -> None:
        self.kube = kube
        self.ns = ensure_namespace(kube, name)
        self.nodes = [f"{name}-n{i}" for i in range(4)]
        for node in self.nodes:
            kube.create("nodes", make_node_dict(node, 4, labels={"e2e-ns": name}, capacity=True))
        for gang, cpus in GANGS.items():
            kube.create("podgroups", {"metadata": {"name": gang}, "spec": {
                "schedulingPolicy": {"gang": {"minCount": len(cpus)}}}}, self.ns)
            for i, cpu in enumerate(cpus):
                kube.create("pods", make_pod_dict(f"{gang}-{i}", cpu, namespace=None, group=gang,
                                                  nodeSelector={"e2e-ns": name}), self.ns)

    def run(self, cluster: Any) -> Scheduler:
        """A scheduler that lists, restores, keeps its promises and runs one cycle."""
        scheduler = Scheduler(Scoped(cluster, self.ns), load_settings())
        scheduler.start()
        scheduler.schedule_once()
        return scheduler

    def bound(self, gang: str) -> list[str]:
        pods = (self.kube.get("pods", f"{gang}-{i}", self.ns) for i in range(len(GANGS[gang])))
        return [(p or {}).get("spec", {}).get("nodeName") or "" for p in pods]

    def check(self, scheduler: Scheduler) -> None:
        check_invariants(self.kube, scheduler, self.ns, node_prefix=f"{self.ns}-")

    def close(self) -> None:
        for node in self.nodes:
            self.kube.delete("nodes", node)


@pytest.fixture
def spaces(kube: KubeCluster, kube_namespace: str) -> Iterator[list[Space]]:
    made: list[Space] = []
    yield made
    for space in made:
        space.close()


def test_a_kill_at_every_write_then_a_restart_keeps_every_gang_whole(
    kube: KubeCluster, kube_namespace: str, spaces: list[Space]
) -> None:
    reference = Space(kube, f"{kube_namespace}-ref")
    spaces.append(reference)
    faulty = Faulty(kube)
    reference.run(faulty)
    writes = faulty.writes
    assert sum(w.startswith("bind") for w in writes) == 7, writes
    for kill_at in range(1, len(writes) + 1):
        space = Space(kube, f"{kube_namespace}-k{kill_at}")
        spaces.append(space)
        where = f"killed before write {kill_at} ({writes[kill_at - 1]})"
        with pytest.raises(Killed):
            space.run(Faulty(kube, kill_at))
        restarted = space.run(kube)
        space.check(restarted)
        for gang in ("a", "b"):
            assert all(space.bound(gang)), f"{where}: gang {gang} is {space.bound(gang)}"
        assert not any(space.bound("c")), f"{where}: c cannot fit beside a and b"
        for i in range(len(GANGS["a"])):
            kube.patch_status("pods", f"a-{i}", {"status": {"phase": "Succeeded"}}, space.ns)
        again = space.run(kube)
        space.check(again)
        assert all(space.bound("c")), f"{where}: c is placed whole once a finished"
        space.close()
        spaces.remove(space)
