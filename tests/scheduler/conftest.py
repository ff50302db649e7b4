"""A scheduler over the in-memory cluster, and builders for its objects."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from fluence_core.cluster_api import NODES, PODGROUPS, PODS
from fluence_core.fake_cluster import FakeCluster
from fluence_core.resource_config import ResourceConfig, parse_resource_config
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings


def node(name: str, cpu: int = 4, memory: str = "16Gi", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
        "spec": dict(extra.pop("spec", {})),
        "status": {"allocatable": {"cpu": str(cpu), "memory": memory, **extra}},
    }
    return body


def pod(name: str, cpu: str = "1", *, group: str | None = None, gates: list[str] | None = None,
        priority: int = 0, scheduler: str = "fluence", node_name: str | None = None,
        requests: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "priority": priority,
        "containers": [
            {
                "name": "app",
                "image": "busybox",
                "resources": {
                    "requests": {"cpu": cpu, **(requests or {})},
                    "limits": {k: v for k, v in (requests or {}).items() if "/" in k},
                },
            }
        ],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def pod_group(name: str, min_count: int | None, namespace: str = "default") -> dict[str, Any]:
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": policy},
    }


class Harness:
    """A fake cluster plus a scheduler, driven step by step without threads."""

    def __init__(self, cluster: FakeCluster, config: ResourceConfig | None = None) -> None:
        self.cluster = cluster
        self.config = config
        self.scheduler = self.new_scheduler()

    def new_scheduler(self) -> Scheduler:
        scheduler = Scheduler(self.cluster, load_settings(), config=self.config)
        scheduler.start()
        return scheduler

    def restart(self) -> Scheduler:
        self.scheduler = self.new_scheduler()
        return self.scheduler

    def cycle(self) -> list[Any]:
        self.scheduler.pump()
        results = self.scheduler.schedule_once()
        self.scheduler.pump()
        return results

    def add(self, *objects: dict[str, Any]) -> None:
        for obj in objects:
            resource = {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS}[obj["kind"]]
            self.cluster.create(resource, obj, obj["metadata"].get("namespace"))

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        found = self.cluster.get(PODS, name, namespace)
        assert found is not None
        return found["spec"].get("nodeName")

    def finish(self, name: str, phase: str = "Succeeded", namespace: str = "default") -> None:
        self.cluster.patch_status(PODS, name, {"status": {"phase": phase}}, namespace)


@pytest.fixture
def harness_factory() -> Callable[..., Harness]:
    def make(*objects: dict[str, Any], resources: str | None = None) -> Harness:
        cluster = FakeCluster()
        config = parse_resource_config(resources, "test-resources.yaml") if resources else None
        for obj in objects:
            resource = {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS}[obj["kind"]]
            cluster.create(resource, obj, obj["metadata"].get("namespace"))
        return Harness(cluster, config)

    return make
