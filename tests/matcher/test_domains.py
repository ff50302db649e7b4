"""fluence_core.matcher.domains: the fewest racks whose free totals hold a gang, and nodes
split by the domains of any keys."""

from __future__ import annotations

from fluence_core import names
from fluence_core.graph import Domain, NodeVertex, ResourceGraph
from fluence_core.matcher.domains import fewest_holding, partition
from fluence_core.models import NodeInfo
from fluence_core.topology import Level

FREE = {"r0": (2, 0), "r1": (8, 0), "r2": (6, 2), "r3": (8, 1)}


def free(rack: str) -> tuple[int, int]:
    return FREE[rack]


def test_the_emptiest_racks_are_taken_until_their_free_cores_hold_the_gang() -> None:
    assert fewest_holding(FREE, free, 12, 0) == ["r3", "r1"]  # even cores: more GPUs first


def test_racks_equally_empty_are_taken_in_name_order() -> None:
    even = {"b": (4, 0), "a": (4, 0), "c": (4, 0)}
    assert fewest_holding(even, lambda r: even[r], 6, 0) == ["a", "b"]


def test_a_gang_asking_for_gpus_takes_the_racks_with_most_free_gpus_first() -> None:
    assert fewest_holding(FREE, free, 10, 3) == ["r2", "r3"]


def test_nothing_narrower_when_it_takes_every_rack_or_all_fall_short() -> None:
    assert fewest_holding(FREE, free, 23, 0) is None  # every rack
    assert fewest_holding(FREE, free, 25, 0) is None  # more than all of them
    assert fewest_holding(FREE, free, 1, 4) is None  # GPUs nobody has


def test_numbered_domains_are_chosen_by_the_same_rule() -> None:
    numbered = {0: (2, 0), 1: (8, 0), 2: (6, 2), 3: (8, 1)}
    assert fewest_holding(numbered, lambda c: numbered[c], 12, 0) == [3, 1]


RACK = Level(names.RACK_LABEL, "rack")
ISLAND = "example.com/island"


def _graph() -> ResourceGraph:
    labels = {"a": {names.RACK_LABEL: "r1", ISLAND: "i1"}, "b": {names.RACK_LABEL: "r1"},
              "c": {names.RACK_LABEL: "r2", ISLAND: "i1"}, "d": {ISLAND: "i2"}}
    return ResourceGraph([NodeInfo(n, 4, 4096, labels=v) for n, v in labels.items()],
                         levels=(RACK,))


def part_names(found: dict[Domain, list[NodeVertex]]) -> dict[Domain, list[str]]:
    return {domain: [node.name for node in nodes] for domain, nodes in found.items()}


def test_a_level_splits_by_its_domains_and_leaves_its_unknown_domain_out() -> None:
    graph = _graph()
    assert part_names(partition(graph, graph.nodes, ["rack"])) == {
        ("r1",): ["a", "b"], ("r2",): ["c"]}


def test_a_label_that_is_no_level_splits_by_its_value_and_the_hostname_by_node() -> None:
    graph = _graph()
    assert part_names(partition(graph, graph.nodes, [ISLAND])) == {
        ("i1",): ["a", "c"], ("i2",): ["d"]}
    assert list(partition(graph, graph.nodes, [names.HOSTNAME_LABEL])) == [
        ("a",), ("b",), ("c",), ("d",)]


def test_several_keys_split_by_every_one_of_them() -> None:
    graph = _graph()
    assert part_names(partition(graph, graph.nodes, [names.RACK_LABEL, ISLAND])) == {
        ("r1", "i1"): ["a"], ("r2", "i1"): ["c"]}
