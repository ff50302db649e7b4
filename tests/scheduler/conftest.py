"""A scheduler over the in-memory cluster, and builders for its objects."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.resource_config import ResourceConfig, parse_resource_config
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import make_node_dict, make_pod_dict, make_pod_group_dict


def node(name: str, cpu: int = 4, memory: str = "16Gi", *,
         labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, hostname: bool = False, zone: str | None = None,
         spec: dict[str, Any] | None = None, **extra: str) -> dict[str, Any]:
    """A Node with no pod limit; ``extra`` is more allocatable, the keyword options are
    :func:`~fluence_core.testing.make_node_dict`'s, ``spec`` is set over its spec as given
    (malformed, for the hostile tests)."""
    body = make_node_dict(name, cpu, memory, pods=None, allocatable=extra, labels=labels,
                          taints=taints, unschedulable=unschedulable, hostname=hostname,
                          zone=zone)
    body["spec"].update(spec or {})
    return body


def pod(name: str, cpu: str | None = "1", *, group: str | None = None,
        gates: list[str] | None = None, priority: int = 0, scheduler: str = "fluence",
        node_name: str | None = None, requests: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, namespace: str = "default",
        **more: Any) -> dict[str, Any]:
    """A pod of ``group`` (its PodGroup), limited to its extended-resource requests;
    ``more`` are :func:`~fluence_core.testing.make_pod_dict`'s other options
    (``sidecars=``, ``pod_requests=``, ``ports=``) and spec keys (``overhead=``)."""
    extended = {k: v for k, v in (requests or {}).items() if "/" in k}
    return make_pod_dict(name, cpu, extra=requests, annotations=annotations,
                         namespace=namespace, group=group, gates=gates or (),
                         priority=priority, scheduler=scheduler, node_name=node_name,
                         limits=extended, **more)


pod_group = make_pod_group_dict

PAST_ANY_BACKOFF = 60.0
"""Longer than any backoff (``pod_max_backoff_seconds`` is 10 by default)."""


class Harness:
    """A fake cluster plus a scheduler, driven step by step without threads."""

    def __init__(self, cluster: FakeCluster, config: ResourceConfig | None = None) -> None:
        self.cluster = cluster
        self.config = config
        self.now = 0.0
        """The schedulers' virtual clock (seconds): :meth:`cycle` moves it on."""
        self.scheduler = self.new_scheduler()

    def clock(self) -> float:
        return self.now

    def new_scheduler(self) -> Scheduler:
        scheduler = Scheduler(self.cluster, load_settings(), config=self.config, clock=self.clock)
        scheduler.start()
        return scheduler

    def restart(self) -> Scheduler:
        self.scheduler = self.new_scheduler()
        return self.scheduler

    def cycle(self, after: float = PAST_ANY_BACKOFF) -> list[Any]:
        """Apply the events, run one cycle, apply its own events; ``after`` seconds after the
        last cycle (by default past any backoff: a group that failed is tried again as soon
        as something changed, unless a test says how soon the cycle comes)."""
        self.now += after
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
