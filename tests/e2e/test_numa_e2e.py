"""NUMA zones on a real kube-apiserver: with the NodeResourceTopology CRD installed, the
scheduler reads a node's zones, keeps a single-numa pod waiting while no zone holds it,
and binds it once the node's zones change (skipped without KUBEBUILDER_ASSETS)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import NODE_RESOURCE_TOPOLOGIES, Resource
from fluence_core.kube.client import KubeCluster
from fluence_core.testing_apiserver import wait_for
from tests.e2e.test_scheduler_e2e import Run, running
from tests.test_numa import nrt

pytestmark = pytest.mark.e2e

CRDS = Resource("customresourcedefinitions", "CustomResourceDefinition",
                group="apiextensions.k8s.io", version="v1", namespaced=False)
CRD_NAME = f"{NODE_RESOURCE_TOPOLOGIES.plural}.{names.NRT_GROUP}"


def _crd() -> dict[str, Any]:
    """The NodeResourceTopology CRD, its schema left open (the scheduler only reads it)."""
    return {"metadata": {"name": CRD_NAME, "annotations": {  # a *.k8s.io group asks for it
        "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1870"}},
        "spec": {
        "group": names.NRT_GROUP, "scope": "Cluster",
        "names": {"plural": NODE_RESOURCE_TOPOLOGIES.plural,
                  "singular": "noderesourcetopology", "kind": NODE_RESOURCE_TOPOLOGIES.kind},
        "versions": [{"name": "v1alpha2", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object",
                                "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture
def zoned(kube: KubeCluster, kube_namespace: str,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    # On Fluxion, zones reach the graph only with FLUENCE_FLUXION_NUMA (off by default:
    # Fluxion then keeps every pod's cores inside one zone); the embedded matcher ignores it.
    monkeypatch.setenv("FLUENCE_FLUXION_NUMA", "true")
    kube.create(CRDS, _crd())
    wait_for(lambda: _served(kube), "the NodeResourceTopology CRD served")
    try:
        with running(Run(kube, kube_namespace)) as harness:
            yield harness
    finally:
        kube.delete(CRDS, CRD_NAME)


def _served(kube: KubeCluster) -> bool:
    try:
        kube.list(NODE_RESOURCE_TOPOLOGIES)
    except Exception:  # 404 until the CRD is established
        return False
    return True


def test_a_single_numa_pod_waits_for_a_zone_then_binds_when_the_zones_change(
        zoned: Run) -> None:
    node = zoned.node("n0", cpu=8)
    kube = zoned.kube
    kube.create(NODE_RESOURCE_TOPOLOGIES, nrt(node, ("node-0", "4", "0"), ("node-1", "4", "0")))
    try:
        zoned.start_scheduler()
        zoned.pod("wide", "5", annotations={names.SINGLE_NUMA_ANNOTATION: "true"})
        zoned.wait(lambda: bool(zoned.events("wide", "FailedScheduling")),
                   "the pod refused: no 4-core zone holds 5 cores")
        assert zoned.node_of("wide") is None
        current = kube.get(NODE_RESOURCE_TOPOLOGIES, node)
        assert current is not None
        kube.replace(NODE_RESOURCE_TOPOLOGIES, {
            **nrt(node, ("node-0", "6", "0"), ("node-1", "2", "0")),
            "metadata": current["metadata"]})
        zoned.wait(lambda: zoned.node_of("wide") == node, "the pod bound in the 6-core zone")
    finally:
        kube.delete(NODE_RESOURCE_TOPOLOGIES, node)
