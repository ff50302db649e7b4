"""fluence_core.topology: levels validated loudly; the levels a constraint tries, in turn."""

from __future__ import annotations

import pytest

from fluence_core import names
from fluence_core.errors import ResourceConfigError, SettingsError, TopologyError
from fluence_core.resource_config import parse_resource_config
from fluence_core.settings import load_settings
from fluence_core.topology import (
    Constraint,
    LabelKeys,
    Level,
    SliceLayer,
    attempts,
    choose_levels,
    label_keys,
    parse_level_labels,
    parse_levels,
    slice_error,
)

ZONE = Level(names.ZONE_LABEL, "zone")
BLOCK = Level("example.com/block", "block")
RACK = Level(names.RACK_LABEL, "rack")
THREE = (ZONE, BLOCK, RACK)


# -- levels ---------------------------------------------------------------------------------------

def test_a_level_is_a_label_whose_type_is_its_name_part_unless_given() -> None:
    levels = parse_levels(
        [names.ZONE_LABEL, {"label": "example.com/blk"}, {"label": "x.io/r", "type": "rack"}],
        "f: topology.levels",
    )
    assert levels == (ZONE, Level("example.com/blk", "blk"), Level("x.io/r", "rack"))


@pytest.mark.parametrize(("raw", "where", "why"), [
    ("zone", "f: topology.levels", "expected a list"),
    (["not a label!"], "f: topology.levels[0]", "not a valid node label key"),
    ([names.HOSTNAME_LABEL], "f: topology.levels[0]", "the node itself"),
    (["a.io/node"], "f: topology.levels[0]", "vertex type 'node' is one the graph already uses"),
    (["a.io/rack", "b.io/rack"], "f: topology.levels[1]", "type 'rack' is already level 0's"),
    ([names.ZONE_LABEL, names.ZONE_LABEL], "f: topology.levels[1]", "is already level 0"),
    ([{"label": "a.io/x", "typ": "x"}], "f: topology.levels[0]", "unknown keys ['typ']"),
    ([{"label": "a.io/x", "type": "X Y"}], "f: topology.levels[0].type", "lower-case letters"),
    ([3], "f: topology.levels[0]", "expected a node label"),
    ([f"a.io/l{i}" for i in range(17)], "f: topology.levels", "at most 16 levels"),
])
def test_bad_levels_fail_naming_the_entry(raw: object, where: str, why: str) -> None:
    with pytest.raises(TopologyError) as failure:
        parse_levels(raw, "f: topology.levels")
    assert str(failure.value).startswith(where + ":") and why in str(failure.value)


def test_resources_yaml_holds_the_levels_and_names_a_bad_one() -> None:
    config = parse_resource_config(
        "topology:\n  levels: [topology.kubernetes.io/zone, topology.kubernetes.io/rack]\n",
        "resources.yaml",
    )
    assert config.levels == (ZONE, RACK) and config.resources == ()
    with pytest.raises(ResourceConfigError, match=r"resources.yaml: topology.levels\[1\]: "):
        parse_resource_config("resources: []\ntopology:\n  levels: [a.io/x, 'b c']\n",
                              "resources.yaml")
    with pytest.raises(ResourceConfigError, match="topology: unknown keys"):
        parse_resource_config("topology: {level: []}\n", "resources.yaml")


def test_the_setting_holds_the_levels_and_a_bad_one_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLUENCE_TOPOLOGY_LEVELS", f"{names.ZONE_LABEL}, {names.RACK_LABEL}")
    assert load_settings().graph.levels == (ZONE, RACK)
    monkeypatch.setenv("FLUENCE_TOPOLOGY_LEVELS", f"{names.RACK_LABEL},x.io/rack")
    with pytest.raises(SettingsError, match="FLUENCE_TOPOLOGY_LEVELS"):
        load_settings()


def test_file_and_setting_must_agree_when_both_are_set() -> None:
    assert choose_levels((RACK,), (), "f", "S") == (RACK,)
    assert choose_levels((), (RACK,), "f", "S") == (RACK,)
    assert choose_levels((RACK,), parse_level_labels(names.RACK_LABEL, "S"), "f", "S") == (RACK,)
    with pytest.raises(TopologyError, match="S .* and f topology.levels .* disagree"):
        choose_levels((RACK,), (ZONE,), "f", "S")


# -- the levels a group is matched at ------------------------------------------------------------

def test_by_default_a_group_tries_the_narrowest_level_then_each_wider_then_anywhere() -> None:
    assert attempts(THREE, Constraint()) == [2, 1, 0, None]
    assert attempts((), Constraint()) == [None]


def test_a_required_level_is_the_last_tried_and_never_left() -> None:
    assert attempts(THREE, Constraint(required=(BLOCK.label,))) == [2, 1]
    assert attempts(THREE, Constraint(required=("rack", names.ZONE_LABEL))) == [2]


def test_a_preferred_level_falls_back_upward_to_the_required_one_or_anywhere() -> None:
    assert attempts(THREE, Constraint(preferred=("block",))) == [1, 0, None]
    assert attempts(THREE, Constraint(required=("zone",), preferred=("rack",))) == [2, 1, 0]
    assert attempts(THREE, Constraint(required=("rack",), preferred=("zone",))) == [2]


def test_unconstrained_seeks_no_domain() -> None:
    assert attempts(THREE, Constraint(unconstrained=True)) == [None]


def test_a_key_that_is_no_level_is_a_node_label_kept_apart_from_the_hierarchy() -> None:
    outside = Constraint(required=("example.com/pod",), source="PodGroup a/b")
    assert attempts(THREE, outside) == [2, 1, 0, None]
    assert label_keys(THREE, outside) == LabelKeys(required=("example.com/pod",))
    assert attempts((), Constraint(required=("rack",))) == [None]
    assert label_keys((), Constraint(required=("rack",))) == LabelKeys(required=("rack",))


def test_a_configured_level_named_by_label_or_type_is_no_label_key() -> None:
    both = Constraint(required=("rack", "example.com/island"), preferred=("zone",))
    assert label_keys(THREE, both) == LabelKeys(required=("example.com/island",))
    assert attempts(THREE, both) == [2]


def test_a_key_that_is_neither_a_level_nor_a_label_key_is_named() -> None:
    with pytest.raises(TopologyError, match="PodGroup a/b: topology key 'not a label!' is "
                       "neither a configured level"):
        attempts(THREE, Constraint(required=("not a label!",), source="PodGroup a/b"))


def test_a_group_whose_size_is_no_multiple_of_its_slice_size_is_named() -> None:
    sliced = Constraint(slices=(SliceLayer("rack", 4), SliceLayer("node", 2)), source="pod a")
    assert slice_error(sliced, 8) is None
    assert "the group has 6 pods, not a multiple of its slice size 4 (rack)" in (
        slice_error(sliced, 6) or "")
    assert slice_error(Constraint(), 5) is None
