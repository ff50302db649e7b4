"""A gang bigger than a rack, held to one block, uses the fewest racks of it: the emptiest
racks first, not the first nodes with room (which, in a tight block, opened a rack more
than it needed)."""

from __future__ import annotations

import os

import pytest

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.jobspec import compute_jobspec
from fluence_core.models import NodeInfo, PodRequest
from fluence_core.topology import Constraint
from tests.matcher.test_topology import BLOCK, RACK, gang


@pytest.fixture(params=["embedded", "fluxion"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "fluxion" and not os.environ.get("FLUENCE_FLUXION_LIB"):
        pytest.skip("Fluxion matcher unavailable: FLUENCE_FLUXION_LIB is not set")
    return str(request.param)


def _matcher(graph: ResourceGraph, kind: str) -> Matcher:
    if kind == "embedded":
        return EmbeddedMatcher(graph, "first")
    from fluence_fluxion.matcher import FluxionMatcher, load_library

    return FluxionMatcher(graph, "first", load_library(os.environ["FLUENCE_FLUXION_LIB"]))


def _block_of_three_racks(kind: str) -> tuple[ResourceGraph, Matcher]:
    """Racks r0, r1, r2 of two 4-core nodes in block b0; r0's first node full, r1's first
    node half used, r2 empty."""
    nodes = [NodeInfo(f"r{r}-n{n}", 4, 4096, labels={BLOCK.label: "b0", RACK.label: f"r{r}"})
             for r in range(3) for n in range(2)]
    graph = ResourceGraph(nodes, levels=(BLOCK, RACK))
    matcher = _matcher(graph, kind)
    for node, cores in (("r0-n0", 4), ("r1-n0", 2)):
        assert matcher.match_allocate(
            compute_jobspec([PodRequest("x", cores=cores)], {"hostlist": [node]})) is not None
    return graph, matcher


def test_a_block_required_gang_bigger_than_a_rack_takes_the_fewest_racks(kind: str) -> None:
    graph, matcher = _block_of_three_racks(kind)
    result = match_group(gang(3, cores=4, constraint=Constraint(required=(BLOCK.label,))),
                         graph, matcher)
    assert isinstance(result, GroupMatch)
    racks = {graph.node(p.node).labels[RACK.label] for p in result.placements.values()}
    assert len(racks) == 2, f"3 whole nodes fit 2 racks (r2 and r1), got {sorted(racks)}"
    assert "r2" in racks


def test_when_the_fewest_racks_cannot_hold_it_the_whole_block_is_searched(kind: str) -> None:
    graph, matcher = _block_of_three_racks(kind)
    # 4 pods of 3 cores: r2 and r1 hold 14 free cores by their totals, but only 3 nodes
    # with 3 free; the fourth pod needs r0's empty node
    result = match_group(gang(4, cores=3, constraint=Constraint(required=(BLOCK.label,))),
                         graph, matcher)
    assert isinstance(result, GroupMatch)
    racks = {graph.node(p.node).labels[RACK.label] for p in result.placements.values()}
    assert racks == {"r0", "r1", "r2"}
