"""The figures bench_topology reports mean what docs/topology.md says they mean."""

from __future__ import annotations

import pytest

from tests.bench_module import load

m = load("topology_metrics")
ZONE, BLOCK, RACK = "topology.kubernetes.io/zone", "example.com/block", "example.com/rack"
LEVELS = ((ZONE, "zone"), (BLOCK, "block"), (RACK, "rack"))
# two zones; zone z0 holds blocks b0 (racks r0, r1) and b1 (rack r2); zone z1 a rack also
# called r0, in a block also called b0: the same values, other domains
LABELS = {
    "a": {ZONE: "z0", BLOCK: "b0", RACK: "r0"}, "b": {ZONE: "z0", BLOCK: "b0", RACK: "r0"},
    "c": {ZONE: "z0", BLOCK: "b0", RACK: "r1"}, "d": {ZONE: "z0", BLOCK: "b1", RACK: "r2"},
    "e": {ZONE: "z1", BLOCK: "b0", RACK: "r0"}, "f": {ZONE: "z0", BLOCK: "b1"},
}
RACK_OF = {n: ":".join(v.values()) for n, v in LABELS.items()}


def test_a_gang_inside_one_rack_has_a_rack_span_of_one() -> None:
    assert m.rack_span(["a", "a", "b"], RACK_OF, pods_per_rack=4) == 1.0


def test_a_gang_that_needs_two_racks_and_uses_two_has_a_rack_span_of_one() -> None:
    assert m.rack_span(["a", "b", "c", "c", "c"], RACK_OF, pods_per_rack=4) == 1.0


def test_a_small_gang_split_over_three_racks_has_a_rack_span_of_three() -> None:
    assert m.rack_span(["a", "c", "d"], RACK_OF, pods_per_rack=4) == 3.0


def test_rack_span_refuses_an_empty_gang_and_a_rack_that_holds_nothing() -> None:
    with pytest.raises(ValueError, match="no placed pod"):
        m.rack_span([], RACK_OF, pods_per_rack=4)
    with pytest.raises(ValueError, match="at least 1"):
        m.min_racks(3, 0)


def test_the_lowest_common_level_is_the_narrowest_domain_holding_every_node() -> None:
    assert m.lowest_common_level(["a", "a"], LABELS, LEVELS) == "node"
    assert m.lowest_common_level(["a", "b"], LABELS, LEVELS) == "rack"
    assert m.lowest_common_level(["a", "c"], LABELS, LEVELS) == "block"
    assert m.lowest_common_level(["a", "d"], LABELS, LEVELS) == "zone"
    assert m.lowest_common_level(["a", "d", "e"], LABELS, LEVELS) == "cluster"


def test_equal_label_values_in_other_zones_are_other_domains() -> None:
    assert m.lowest_common_level(["a", "e"], LABELS, LEVELS) == "cluster"


def test_a_node_without_a_rack_label_shares_no_rack_but_shares_its_block() -> None:
    assert m.lowest_common_level(["d", "f"], LABELS, LEVELS) == "block"


def test_whole_free_racks_counts_racks_with_no_used_node() -> None:
    racks = {"r0": ["a", "b"], "r1": ["c"], "r2": ["d"], "z1r0": ["e"]}
    assert m.whole_free_racks({"a"}, racks) == 3
    assert m.whole_free_racks({"a", "c", "d", "e"}, racks) == 0
    assert m.whole_free_racks(set(), racks) == 4


def test_a_slice_is_whole_when_its_consecutive_pods_share_one_rack() -> None:
    # slices of 2: (a, b) in r0, (c, d) across r1 and r2, (a, e) in two racks named r0
    assert m.whole_slices(["a", "b", "c", "d", "a", "e"], RACK_OF, 2) == (1, 3)
    assert m.whole_slices(["a", "b", "c", "c"], RACK_OF, 2) == (2, 2)
