"""Scheduler parts wired by hand over the in-memory cluster, for the per-part tests."""

from __future__ import annotations

from typing import Any

from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.models import NodeInfo
from fluence_core.scheduler.records import RecordBook
from fluence_core.scheduler.view import ClusterView
from fluence_core.topology import Level

RESOURCES = {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS}

ONE_QPU = """
resources:
  - type: qpu
    name: cepheus
"""
"""A resources.yaml of one exclusive backend, for the restore and record tests."""
TWO_QPUS = ONE_QPU + """  - type: qpu
    name: ankaa
"""
"""Two backends of one type: a record may name the one its pod was not given."""
WANTS_QPU = {"fluxion.flux-framework.org/qpu": "1"}
"""A pod's requests for one of them."""


def cluster_of(*objects: dict[str, Any]) -> FakeCluster:
    cluster = FakeCluster()
    for obj in objects:
        cluster.create(RESOURCES[obj["kind"]], obj, obj["metadata"].get("namespace"))
    return cluster


def started_view(cluster: FakeCluster, *, read_only: bool = False,
                 levels: tuple[Level, ...] = ()) -> ClusterView:
    """A view listed from ``cluster``, on an embedded matcher, records restored, foreign pinned
    (the graph with topology ``levels``)."""
    view = ClusterView(RecordBook(cluster, read_only=read_only))
    for resource in (NODES, PODS, PODGROUPS):
        view.replace(resource.plural, cluster.list(resource).items)
    graph = ResourceGraph([NodeInfo.from_kube(n) for n in view.nodes.values()], levels=levels)
    view.install(graph, EmbeddedMatcher(graph))
    owners = [("podgroups", pg) for pg in view.pod_groups.values()]
    owners += [("pods", p) for p in view.pods.values()]
    view.records.restore(owners, view.matcher, view.alive)
    view.pin_foreign_pods()
    view.started = True
    return view
