"""NUMA zones (from NodeResourceTopology) under the nodes, and pods kept inside one zone,
on every matcher available here (Fluxion when ``FLUENCE_FLUXION_LIB`` is set)."""

from __future__ import annotations

import os
from typing import Callable

import pytest

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_group
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.numa import NodeNuma, NumaZone, ZoneLoad

Factory = Callable[[ResourceGraph, str], Matcher]


def _fluxion(numa: ZoneLoad) -> Factory:
    library = os.environ.get("FLUENCE_FLUXION_LIB")
    if not library:
        pytest.skip("Fluxion matcher unavailable: FLUENCE_FLUXION_LIB is not set")
    from fluence_fluxion.matcher import FluxionMatcher, load_library

    lib = load_library(library)
    return lambda graph, policy: FluxionMatcher(graph, policy, lib, numa=numa)


@pytest.fixture(params=["embedded", "fluxion"])
def matcher_factory(request: pytest.FixtureRequest) -> Factory:
    """The embedded matcher, and Fluxion with every node's NUMA zones loaded
    (FLUENCE_FLUXION_NUMA=all)."""
    if request.param == "embedded":
        return lambda graph, policy: EmbeddedMatcher(graph, policy)
    return _fluxion(numa=ZoneLoad.ALL)


@pytest.fixture(params=["embedded", "fluxion"])
def by_default(request: pytest.FixtureRequest) -> Factory:
    """The embedded matcher, and Fluxion as it starts by default (zones loaded where the
    kubelet enforces single-numa-node)."""
    if request.param == "embedded":
        return lambda graph, policy: EmbeddedMatcher(graph, policy)
    return _fluxion(numa=ZoneLoad.POLICY)


def two_zones(name: str = "n0", cores: tuple[int, int] = (4, 4), gpus: tuple[int, int] = (0, 0),
              *, policy: bool = False) -> NodeInfo:
    """A node of two NUMA zones; ``policy``: its kubelet enforces single-numa-node."""
    numa = NodeNuma((NumaZone("node-0", cores[0], gpus[0]), NumaZone("node-1", cores[1], gpus[1])),
                    single_numa_policy=policy)
    return NodeInfo(name, sum(cores), sum(cores) * 1024, sum(gpus), numa=numa)


def pods(name: str, count: int, cores: int, *, single_numa: bool, gpus: int = 0,
         memory_mib: int = 0, guaranteed: bool = False) -> Group:
    """``guaranteed``: Guaranteed with whole CPUs (what the kubelet's policy aligns)."""
    return Group(name, tuple(
        PodRequest(f"{name}-{i}", cores=cores, gpus=gpus, memory_mib=memory_mib,
                   single_numa=single_numa, numa_aligned=guaranteed) for i in range(count)))


def zones_used(graph: ResourceGraph, result: GroupMatch) -> list[set[int | None]]:
    """For each node share of the match: the zones its cores, GPUs and memory come from."""
    used = []
    for allocation in result.allocations.values():
        for share in allocation.nodes:
            node = graph.node(share.node)
            used.append({node.zone_of("core", i) for i in share.cores}
                        | {node.zone_of("gpu", i) for i in share.gpus}
                        | {node.zone_of("memory", i) for i in share.memory})
    return used


def test_a_single_numa_pod_takes_its_cores_and_memory_from_one_zone(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph([two_zones()])
    matcher = matcher_factory(graph, "first")
    first = match_group(pods("a", 1, 3, single_numa=True), graph, matcher)
    assert isinstance(first, GroupMatch)  # its zone keeps 1 core, the other 4
    result = match_group(pods("b", 1, 2, single_numa=True, memory_mib=2048), graph, matcher)
    assert isinstance(result, GroupMatch)
    (taken,), (now,) = zones_used(graph, first), zones_used(graph, result)
    assert len(taken) == 1 and len(now) == 1 and taken != now


def test_a_single_numa_pod_no_zone_holds_waits_though_the_node_has_the_cores(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph([two_zones()])
    matcher = matcher_factory(graph, "first")
    result = match_group(pods("big", 1, 5, single_numa=True), graph, matcher)
    assert isinstance(result, GroupMiss)


def test_on_the_embedded_matcher_a_pod_without_the_promise_spans_zones() -> None:
    graph = ResourceGraph([two_zones()])
    matcher = EmbeddedMatcher(graph, "first")
    result = match_group(pods("big", 1, 5, single_numa=False), graph, matcher)
    assert isinstance(result, GroupMatch)
    assert zones_used(graph, result) == [{0, 1}]


def test_fluxion_with_zones_loaded_finds_a_pods_cores_under_one_zone_only() -> None:
    # flux-sched (checked here): a slot is placed at the first vertex whose own children are
    # cores, so on a node whose zones are loaded a 5-core pod fits no 4-core zone; this is
    # why Fluxion loads zones only where the kubelet enforces single-numa-node by default
    graph = ResourceGraph([two_zones()])
    assert isinstance(match_group(pods("big", 1, 5, single_numa=False), graph,
                                  _fluxion(numa=ZoneLoad.ALL)(graph, "first")), GroupMiss)
    flat = _fluxion(numa=ZoneLoad.NONE)(graph, "first")
    assert isinstance(match_group(pods("big", 1, 5, single_numa=False), graph, flat),
                      GroupMatch)
    assert isinstance(match_group(pods("one", 1, 1, single_numa=True), graph, flat), GroupMiss)


def test_a_gpu_pod_gets_the_gpus_of_its_cores_zone(matcher_factory: Factory) -> None:
    graph = ResourceGraph([two_zones(gpus=(1, 1))])
    matcher = matcher_factory(graph, "first")
    first = match_group(pods("a", 1, 1, single_numa=True, gpus=1), graph, matcher)
    assert isinstance(first, GroupMatch)
    result = match_group(pods("b", 1, 4, single_numa=True, gpus=1), graph, matcher)
    assert isinstance(result, GroupMatch), "the other zone has 4 cores and its GPU"
    (taken,), (now,) = zones_used(graph, first), zones_used(graph, result)
    assert len(now) == 1 and taken != now


def test_a_single_numa_gang_fills_zones_one_pod_each(matcher_factory: Factory) -> None:
    graph = ResourceGraph([two_zones("n0"), two_zones("n1")])
    matcher = matcher_factory(graph, "first")
    result = match_group(pods("g", 4, 3, single_numa=True), graph, matcher)
    assert isinstance(result, GroupMatch)
    for allocation in result.allocations.values():  # 3 cores in each zone of both nodes
        for share in allocation.nodes:
            node = graph.node(share.node)
            per_zone = [node.zone_of("core", i) for i in share.cores]
            assert sorted(per_zone.count(z) for z in (0, 1)) == [3, 3]
    assert isinstance(match_group(pods("h", 1, 2, single_numa=True), graph, matcher), GroupMiss)


def test_a_node_without_zones_cannot_promise_one_numa_node(matcher_factory: Factory) -> None:
    graph = ResourceGraph([NodeInfo("flat", 8, 8192)])
    matcher = matcher_factory(graph, "first")
    assert isinstance(match_group(pods("a", 1, 1, single_numa=True), graph, matcher), GroupMiss)
    assert isinstance(match_group(pods("a", 1, 1, single_numa=False), graph, matcher),
                      GroupMatch)


def test_a_restored_allocation_holds_the_same_zone_again(matcher_factory: Factory) -> None:
    graph = ResourceGraph([two_zones()])
    matcher = matcher_factory(graph, "first")
    result = match_group(pods("a", 1, 4, single_numa=True), graph, matcher)
    assert isinstance(result, GroupMatch)
    fresh = matcher_factory(graph, "first")
    for allocation in result.allocations.values():
        fresh.restore(allocation)
    again = match_group(pods("b", 1, 4, single_numa=True), graph, fresh)
    assert isinstance(again, GroupMatch)
    assert zones_used(graph, again) != zones_used(graph, result)


def test_single_numa_pods_share_a_zone_core_by_core(matcher_factory: Factory) -> None:
    # Fluxion holds a numanode named inside a slot whole; Fluence asks it for a slot of
    # cores under a zoned node instead, so eight one-core pods fill two 4-core zones
    graph = ResourceGraph([two_zones()])
    matcher = matcher_factory(graph, "first")
    for i in range(8):
        assert isinstance(match_group(pods(f"p{i}", 1, 1, single_numa=True), graph, matcher),
                          GroupMatch), f"pod {i} of 8"
    assert isinstance(match_group(pods("p8", 1, 1, single_numa=False), graph, matcher),
                      GroupMiss)


def test_a_zone_partly_held_by_a_single_numa_pod_still_serves_other_pods(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph([two_zones()])
    matcher = matcher_factory(graph, "first")
    assert isinstance(match_group(pods("one", 1, 1, single_numa=True), graph, matcher),
                      GroupMatch)
    assert isinstance(match_group(pods("three", 2, 3, single_numa=False), graph, matcher),
                      GroupMatch)


def test_under_the_kubelets_policy_a_guaranteed_pod_goes_where_one_zone_holds_it(
        by_default: Factory) -> None:
    # the policy node's zones hold 4 cores each; the kubelet there would refuse 5 cores
    # (TopologyAffinityError), so the pod goes to the node without the policy
    graph = ResourceGraph([two_zones("strict", policy=True), two_zones("loose")])
    matcher = by_default(graph, "first")
    result = match_group(pods("big", 1, 5, single_numa=False, guaranteed=True), graph, matcher)
    assert isinstance(result, GroupMatch)
    assert [s.node for a in result.allocations.values() for s in a.nodes] == ["loose"]
    assert zones_used(graph, result) == [{0, 1}], "without the policy it spans both zones"


def test_under_the_kubelets_policy_a_guaranteed_pod_no_zone_holds_waits(
        by_default: Factory) -> None:
    graph = ResourceGraph([two_zones("strict", policy=True)])
    matcher = by_default(graph, "first")
    assert isinstance(match_group(pods("big", 1, 5, single_numa=False, guaranteed=True),
                                  graph, matcher), GroupMiss)
    assert isinstance(match_group(pods("four", 2, 4, single_numa=False, guaranteed=True),
                                  graph, matcher), GroupMatch), "one zone each"


def test_by_default_pods_span_the_zones_of_a_node_without_the_policy(
        by_default: Factory) -> None:
    graph = ResourceGraph([two_zones()])
    matcher = by_default(graph, "first")
    result = match_group(pods("big", 1, 7, single_numa=False, guaranteed=True), graph, matcher)
    assert isinstance(result, GroupMatch)
    assert zones_used(graph, result) == [{0, 1}]


def test_by_default_fluxion_keeps_any_whole_core_pod_in_one_zone_of_a_policy_node() -> None:
    # the known difference: a pod the kubelet does not align (not Guaranteed) may span
    # zones there, and the embedded matcher lets it; Fluxion cannot ask for "any zone or
    # both", so on a policy node it holds such a pod to one zone too
    graph = ResourceGraph([two_zones("strict", policy=True)])
    big = pods("big", 1, 5, single_numa=False, guaranteed=False)
    assert isinstance(match_group(big, graph, EmbeddedMatcher(graph, "first")), GroupMatch)
    graph = ResourceGraph([two_zones("strict", policy=True)])
    fluxion = _fluxion(numa=ZoneLoad.POLICY)(graph, "first")
    assert isinstance(match_group(big, graph, fluxion), GroupMiss)
    assert isinstance(match_group(pods("small", 1, 4, single_numa=False), graph, fluxion),
                      GroupMatch)


def test_by_default_fluxion_gives_single_numa_pods_only_the_policy_nodes_zones() -> None:
    graph = ResourceGraph([two_zones("loose"), two_zones("strict", policy=True)])
    fluxion = _fluxion(numa=ZoneLoad.POLICY)(graph, "first")
    result = match_group(pods("one", 3, 3, single_numa=True), graph, fluxion)
    assert isinstance(result, GroupMiss), "two zones of 4 cores on the policy node hold two"
    result = match_group(pods("two", 2, 3, single_numa=True), graph, fluxion)
    assert isinstance(result, GroupMatch)
    assert {s.node for a in result.allocations.values() for s in a.nodes} == {"strict"}


def test_a_single_numa_pod_gets_memory_from_the_zone_that_reports_it(
        matcher_factory: Factory) -> None:
    # 8 cores, 16 GiB: zone 0 reports 12 GiB, zone 1 4 GiB (chunks of 2 GiB: 6 and 2)
    numa = NodeNuma((NumaZone("node-0", 4, 0, 12 * 1024), NumaZone("node-1", 4, 0, 4 * 1024)))
    graph = ResourceGraph([NodeInfo("n0", 8, 16 * 1024, numa=numa)])
    matcher = matcher_factory(graph, "first")
    result = match_group(pods("fat", 1, 1, single_numa=True, memory_mib=10 * 1024), graph,
                         matcher)
    assert isinstance(result, GroupMatch)
    assert zones_used(graph, result) == [{0}]
    assert isinstance(match_group(pods("more", 1, 1, single_numa=True, memory_mib=6 * 1024),
                                  graph, matcher), GroupMiss), "zone 1 holds 4 GiB"
