"""Slices: a group cut into slices of a given size, each inside one domain of its layer, the
whole inside its required level; and keys that name no configured level, kept as node
labels. Every test runs on every matcher available here (Fluxion when
``FLUENCE_FLUXION_LIB`` is set)."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import MatchOutcome
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_group
from fluence_core.matcher.jobspec import slice_kind, slice_of, slice_span
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.topology import Constraint, Level, SliceLayer

from tests.matcher.solver import Factory

BLOCK = Level("example.com/block", "block")
RACK = Level(names.RACK_LABEL, "rack")
LEVELS = (BLOCK, RACK)
ISLAND = "example.com/island"


def node(name: str, block: str, rack: str, cores: int = 4, **labels: str) -> NodeInfo:
    return NodeInfo(name, cores, cores * 1024, 0,
                    labels={BLOCK.label: block, RACK.label: rack, **labels})


def gang(size: int, constraint: Constraint, cores: int = 4, name: str = "g") -> Group:
    return Group(name, tuple(PodRequest(f"{name}-{i}", cores=cores) for i in range(size)),
                 topology=constraint)


def sliced(size: int, *, required: str | None = BLOCK.label, key: str = RACK.label
           ) -> Constraint:
    return Constraint(required=(required,) if required else (),
                      slices=(SliceLayer(key, size),), source="pod default/g-0")


def rack_of(graph: ResourceGraph, node_name: str | None) -> str:
    assert node_name is not None
    return graph.node(node_name).labels[RACK.label]


def slice_racks(graph: ResourceGraph, result: GroupMatch, size: int) -> list[set[str]]:
    """The racks each slice of ``size`` consecutive pods went to."""
    keys = [pod.key for pod in result.group.pods]
    return [{rack_of(graph, result.placements[k].node) for k in keys[i: i + size]}
            for i in range(0, len(keys), size)]


def test_slices_of_two_go_two_and_two_never_three_and_one(matcher_factory: Factory) -> None:
    # block x: rack r3 has 3 free nodes, rack r2 has 2; a gang of 4 whole nodes fits the
    # block only across both racks, and its slices of 2 must each stay in one rack
    graph = ResourceGraph([node(f"r3-{i}", "x", "r3") for i in range(3)]
                          + [node(f"r2-{i}", "x", "r2") for i in range(2)], levels=LEVELS)
    matcher = matcher_factory(graph, "first")
    result = match_group(gang(4, sliced(2)), graph, matcher)
    assert isinstance(result, GroupMatch), getattr(result, "reason", "")
    assert all(len(racks) == 1 for racks in slice_racks(graph, result, 2))
    assert Counter(rack_of(graph, p.node) for p in result.placements.values()) == {
        "r3": 2, "r2": 2}
    assert [s.domains for s in result.slices] == [
        (f"{RACK.label}=x/r2",), (f"{RACK.label}=x/r3",)], "the tighter rack first"


def test_an_unsliced_gang_on_the_same_block_may_split_three_and_one(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph([node(f"r3-{i}", "x", "r3") for i in range(3)]
                          + [node(f"r2-{i}", "x", "r2") for i in range(2)], levels=LEVELS)
    result = match_group(gang(4, Constraint(required=(BLOCK.label,))), graph,
                         matcher_factory(graph, "first"))
    assert isinstance(result, GroupMatch) and not result.slices


def test_a_sliced_gang_that_one_rack_holds_stays_in_that_rack(matcher_factory: Factory) -> None:
    graph = ResourceGraph([node(f"a-{i}", "x", "a") for i in range(4)]
                          + [node(f"b-{i}", "x", "b") for i in range(2)], levels=LEVELS)
    result = match_group(gang(4, sliced(2)), graph, matcher_factory(graph, "first"))
    assert isinstance(result, GroupMatch)
    assert {rack_of(graph, p.node) for p in result.placements.values()} == {"a"}


def test_a_group_that_is_no_multiple_of_its_slice_size_is_never_placed(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph([node(f"a-{i}", "x", "a") for i in range(4)], levels=LEVELS)
    matcher = matcher_factory(graph, "first")
    result = match_group(gang(3, sliced(2)), graph, matcher)
    assert isinstance(result, GroupMiss) and result.outcome is MatchOutcome.UNSATISFIABLE
    assert "the group has 3 pods, not a multiple of its slice size 2" in result.reason
    assert not matcher.allocations()


def test_slices_that_no_rack_holds_wait_holding_nothing(matcher_factory: Factory) -> None:
    # racks of 1 node each: the block holds 4 pods, but no rack holds a slice of 2
    graph = ResourceGraph([node(f"r{i}", "x", f"r{i}") for i in range(4)], levels=LEVELS)
    matcher = matcher_factory(graph, "first")
    result = match_group(gang(4, sliced(2)), graph, matcher)
    assert isinstance(result, GroupMiss)
    assert f"fits inside no one domain of {RACK.label}" in result.reason
    assert not matcher.allocations()


def test_a_sliced_gang_never_leaves_its_required_block(matcher_factory: Factory) -> None:
    # each block has one rack with room for one slice: the slices fit only across blocks
    graph = ResourceGraph([node("x-0", "x", "xr"), node("x-1", "x", "xr"),
                           node("y-0", "y", "yr"), node("y-1", "y", "yr")], levels=LEVELS)
    result = match_group(gang(4, sliced(2)), graph, matcher_factory(graph, "first"))
    assert isinstance(result, GroupMiss)
    unbounded = match_group(gang(4, sliced(2, required=None)), graph,
                            matcher_factory(graph, "first"))
    assert isinstance(unbounded, GroupMatch), "with no required level the slices may part"


def test_multi_layer_slices_keep_each_pair_on_one_node(matcher_factory: Factory) -> None:
    graph = ResourceGraph([node(f"{r}-{i}", "x", r, cores=8) for r in ("a", "b")
                           for i in range(2)], levels=LEVELS)
    layers = Constraint(required=(BLOCK.label,), slices=(
        SliceLayer(RACK.label, 4), SliceLayer(names.HOSTNAME_LABEL, 2)))
    # 3 cores each: a node of 8 takes 2 of them, and a rack's two nodes take one slice of 4
    result = match_group(gang(8, layers, cores=3), graph, matcher_factory(graph, "first"))
    assert isinstance(result, GroupMatch), getattr(result, "reason", "")
    keys = [pod.key for pod in result.group.pods]
    nodes = [result.placements[k].node for k in keys]
    assert all(nodes[i] == nodes[i + 1] for i in range(0, 8, 2)), nodes
    assert all(len(racks) == 1 for racks in slice_racks(graph, result, 4))
    assert len(result.slices) == 4 and all(len(s.domains) == 2 for s in result.slices)


def test_a_sliced_miss_gives_back_the_slices_it_held(matcher_factory: Factory) -> None:
    # rack a takes the first slice, rack b (one node) cannot take the second
    graph = ResourceGraph([node("a-0", "x", "a"), node("a-1", "x", "a"), node("b-0", "x", "b")],
                          levels=LEVELS)
    matcher = matcher_factory(graph, "first")
    assert isinstance(match_group(gang(4, sliced(2)), graph, matcher), GroupMiss)
    assert not matcher.allocations()
    assert isinstance(match_group(gang(2, sliced(2), name="h"), graph, matcher), GroupMatch)


# -- a key that is no configured level ------------------------------------------------------------

def islands(*sizes: int) -> list[NodeInfo]:
    return [NodeInfo(f"i{i}-{n}", 4, 4096, 0, labels={ISLAND: f"i{i}"})
            for i, size in enumerate(sizes) for n in range(size)]


def test_a_label_that_is_no_level_holds_the_gang_in_one_of_its_domains(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph(islands(3, 2, 4))  # no levels configured at all
    matcher = matcher_factory(graph, "first")
    result = match_group(gang(3, Constraint(required=(ISLAND,))), graph, matcher)
    assert isinstance(result, GroupMatch), getattr(result, "reason", "")
    assert {p.node.split("-")[0] for p in result.placements.values() if p.node} == {"i0"}, (
        "best fit: the smallest island that holds it")


def test_a_label_that_no_domain_can_hold_the_gang_in_makes_it_wait(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph(islands(2, 2))
    matcher = matcher_factory(graph, "first")
    result = match_group(gang(3, Constraint(required=(ISLAND,), source="PodGroup default/g")),
                         graph, matcher)
    assert isinstance(result, GroupMiss)
    assert f"must stay inside one domain of node label ({ISLAND})" in result.reason
    assert f"the best domain of node label is {ISLAND}=i" in result.reason
    assert not matcher.allocations()


def test_a_label_key_beside_configured_levels_keeps_their_hierarchy(
        matcher_factory: Factory) -> None:
    # island i0 (the tighter) spans racks b and a, b listed first; inside it the gang still
    # goes to the one rack that holds it, as the configured levels say
    nodes = [node("b-0", "x", "b", **{ISLAND: "i0"}), node("a-0", "x", "a", **{ISLAND: "i0"}),
             node("a-1", "x", "a", **{ISLAND: "i0"})]
    nodes += [node(f"c-{i}", "x", "c", **{ISLAND: "i1"}) for i in range(4)]
    graph = ResourceGraph(nodes, levels=LEVELS)
    matcher = matcher_factory(graph, "first")
    result = match_group(gang(2, Constraint(required=(ISLAND,))), graph, matcher)
    assert isinstance(result, GroupMatch)
    assert {p.node for p in result.placements.values()} == {"a-0", "a-1"}
    five = match_group(gang(5, Constraint(required=(ISLAND,)), name="t"), graph, matcher)
    assert isinstance(five, GroupMiss), "the block has 5 free nodes, but no island has"


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(racks=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       slices=st.integers(1, 4), size=st.integers(1, 3))
def test_every_placed_slice_is_inside_one_rack_and_the_gang_in_one_block(
        matcher_factory: Factory, racks: list[int], slices: int, size: int) -> None:
    nodes = [node(f"r{r}-{n}", f"b{r // 2}", f"r{r}") for r, count in enumerate(racks)
             for n in range(count)]
    graph = ResourceGraph(nodes, levels=LEVELS)
    result = match_group(gang(slices * size, sliced(size)), graph,
                         matcher_factory(graph, "first"))
    # whole-node pods: a rack holds as many slices as its nodes // size
    fits = any(sum(count // size for r, count in enumerate(racks) if r // 2 == b) >= slices
               for b in range(len(racks)))
    assert isinstance(result, GroupMatch) == fits
    if isinstance(result, GroupMatch):
        assert all(len(r) == 1 for r in slice_racks(graph, result, size))
        blocks = {graph.node(p.node).labels[BLOCK.label]
                  for p in result.placements.values() if p.node}
        assert len(blocks) == 1


def test_slices_are_cut_in_pod_index_order_not_name_order(matcher_factory: Factory) -> None:
    graph = ResourceGraph([node(f"{r}-{i}", "x", r) for r in ("a", "b", "c")
                           for i in range(4)], levels=LEVELS)
    result = match_group(gang(12, sliced(4)), graph, matcher_factory(graph, "first"))
    assert isinstance(result, GroupMatch)
    assert [s.pods for s in result.slices][-1] == tuple(
        f"default/g-{i}" for i in (8, 9, 10, 11)), "g-10 comes after g-9, as Kueue counts"


def test_slices_of_one_shape_are_held_one_match_per_rack_tightest_rack_first(
        matcher_factory: Factory) -> None:
    graph = ResourceGraph([node(f"a-{i}", "x", "a") for i in range(2)]
                          + [node(f"b-{i}", "x", "b") for i in range(6)], levels=LEVELS)
    result = match_group(gang(8, sliced(2)), graph, matcher_factory(graph, "first"))
    assert isinstance(result, GroupMatch), getattr(result, "reason", "")
    assert sorted(result.allocations) == ["compute-slice0", "compute-slice1-3"]
    assert [{rack_of(graph, result.placements[k].node) for k in s.pods}
            for s in result.slices] == [{"a"}, {"b"}, {"b"}, {"b"}]
    assert [s.index for s in result.slices] == [0, 1, 2, 3]


def test_slice_kinds_name_the_run_of_slices_one_allocation_holds() -> None:
    assert slice_kind("compute", 3) == "compute-slice3"
    assert slice_kind("compute", 1, 3) == "compute-slice1-3"
    assert slice_span("compute-slice1-3") == (1, 3) and slice_of("compute-slice1-3") == 1
    assert slice_span("compute-slice3") == (3, 3)
    assert slice_span("compute") is None and slice_span("compute-slicex") is None
