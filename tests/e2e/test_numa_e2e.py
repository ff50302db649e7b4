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


@pytest.fixture(scope="module")
def crd(kube: KubeCluster) -> Iterator[None]:
    """The CRD, once for the module (its deletion finishes later: a second create conflicts)."""
    kube.create(CRDS, _crd())
    wait_for(lambda: _served(kube), "the NodeResourceTopology CRD served")
    try:
        yield
    finally:
        kube.delete(CRDS, CRD_NAME)


@pytest.fixture
def zoned(crd: None, kube: KubeCluster, kube_namespace: str,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    # On Fluxion, by default only the zones of nodes whose kubelet enforces
    # single-numa-node are loaded (Fluxion keeps every pod's cores inside one zone there);
    # the single-numa pod below asks a node without the policy, so all zones are loaded.
    # The embedded matcher ignores the setting.
    monkeypatch.setenv("FLUENCE_FLUXION_NUMA", "all")
    with running(Run(kube, kube_namespace)) as harness:
        yield harness


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


def _guaranteed(run: Run, name: str, cpu: str) -> None:
    """A Guaranteed pod of ``cpu`` whole CPUs: what the kubelet's topology manager aligns."""
    run.pod(name, cpu, memory="1Gi", limits={"cpu": cpu, "memory": "1Gi"})


def test_a_guaranteed_pod_goes_only_where_the_kubelets_policy_admits_it(
        crd: None, kube: KubeCluster, kube_namespace: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # FLUENCE_FLUXION_NUMA as it starts by default: on Fluxion the policy node's zones load
    monkeypatch.delenv("FLUENCE_FLUXION_NUMA", raising=False)
    with running(Run(kube, kube_namespace)) as run:
        strict, loose = run.node("strict", cpu=8), run.node("loose", cpu=8)
        zones = (("node-0", "4", "0"), ("node-1", "4", "0"))
        kube.create(NODE_RESOURCE_TOPOLOGIES, nrt(strict, *zones, policy="single-numa-node"))
        kube.create(NODE_RESOURCE_TOPOLOGIES, nrt(loose, *zones, policy="none"))
        try:
            run.start_scheduler()
            _guaranteed(run, "five-a", "5")
            run.wait(lambda: run.node_of("five-a") is not None, "the first 5-CPU pod bound")
            assert run.node_of("five-a") == loose, "no zone of the policy node holds 5 CPUs"
            # the policy node has 8 free CPUs, but its kubelet would refuse 5 of them
            # (TopologyAffinityError): the second waits
            _guaranteed(run, "five-b", "5")
            run.wait(lambda: bool(run.events("five-b", "FailedScheduling")),
                     "the second 5-CPU pod refused")
            assert run.node_of("five-b") is None
            _guaranteed(run, "four", "4")
            run.wait(lambda: run.node_of("four") == strict, "a 4-CPU pod bound in one zone")
        finally:
            for node in (strict, loose):
                kube.delete(NODE_RESOURCE_TOPOLOGIES, node)
