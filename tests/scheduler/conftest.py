"""A scheduler over the in-memory cluster, and builders for its objects."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.resource_config import parse_resource_config
from fluence_core.testing import (
    SchedulerHarness, make_node_dict, make_pod_dict, make_pod_group_dict,
)


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

PAST_ANY_BACKOFF = SchedulerHarness.PAST_ANY_BACKOFF
"""Longer than any backoff (``pod_max_backoff_seconds`` is 10 by default)."""


Harness = SchedulerHarness
"""A fake cluster plus a scheduler, driven step by step without threads (the one plugin
authors get from :mod:`fluence_core.testing`)."""


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
