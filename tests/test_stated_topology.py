"""fluence_core.stated_topology: a group's constraint read where users write it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fluence_core import names
from fluence_core.errors import TopologyError
from fluence_core.stated_topology import read_constraint, stated_annotations
from fluence_core.testing import make_pod_dict, make_pod_group_dict
from fluence_core.topology import Constraint, Level, SliceLayer, attempts

RACK = Level(names.RACK_LABEL, "rack")
RACK_GANG = make_pod_group_dict("g", 2, "ns", topology=[names.RACK_LABEL])
"""Gang ``ns/g``, required to sit in one rack."""


def pod(name: str, **annotations: str) -> dict[str, Any]:
    """Member ``name`` of a group in namespace ``ns``, annotated so."""
    return make_pod_dict(name, namespace="ns", annotations=annotations)


def test_the_pod_groups_topology_key_is_required() -> None:
    read = read_constraint(RACK_GANG, [pod("a"), pod("b")])
    assert read.required == (names.RACK_LABEL,) and read.preferred == ()
    assert "PodGroup ns/g spec.schedulingConstraints.topology" in read.source


def test_kueue_and_fluence_annotations_are_read_from_the_pods() -> None:
    kueue = {names.KUEUE_PREFERRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
             names.TOPOLOGY_REQUIRED_ANNOTATION: "block"}
    read = read_constraint(None, [pod("a", **kueue), pod("b", **kueue)])
    assert read.required == ("block",) and read.preferred == (names.RACK_LABEL,)
    unconstrained = {names.KUEUE_UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true"}
    assert read_constraint(None, [pod("a", **unconstrained)]).unconstrained


def test_members_that_disagree_make_an_error_naming_two_of_them() -> None:
    read = read_constraint(None, [pod("a", **{names.TOPOLOGY_REQUIRED_ANNOTATION: "rack"}),
                                  pod("b")])
    assert "pod ns/a has" in read.error and "pod ns/b has none" in read.error
    with pytest.raises(TopologyError):
        attempts((RACK,), read)


def test_a_malformed_pod_group_constraint_is_an_error_not_a_crash() -> None:
    malformed = copy.deepcopy(RACK_GANG)
    malformed["spec"]["schedulingConstraints"]["topology"][0]["key"] = 7
    assert "topology[0].key" in read_constraint(malformed, [pod("a")]).error


def test_a_group_that_states_nothing_has_no_constraint() -> None:
    assert read_constraint(None, [pod("a")]) == Constraint()


def test_objects_without_metadata_state_nothing() -> None:
    assert read_constraint({"spec": {}}, [{"spec": {}}, {"metadata": None}]) == Constraint()
    assert stated_annotations(None, {"spec": {}}, {"metadata": {"annotations": None}}) == {}


def test_the_nearest_object_states_an_annotation_first() -> None:
    template = {"metadata": {"annotations": {names.TOPOLOGY_REQUIRED_ANNOTATION: " rack "}}}
    job = {"metadata": {"annotations": {names.TOPOLOGY_REQUIRED_ANNOTATION: "block",
                                        names.TOPOLOGY_PREFERRED_ANNOTATION: "rack"}}}
    assert stated_annotations(template, job) == {names.TOPOLOGY_REQUIRED_ANNOTATION: "rack",
                                                 names.TOPOLOGY_PREFERRED_ANNOTATION: "rack"}


# -- slices ---------------------------------------------------------------------------------

SLICE_PAIR = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: "example.com/block",
              names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
              names.KUEUE_SLICE_SIZE_ANNOTATION: "2"}


def test_kueues_slice_pair_is_one_layer_of_slices() -> None:
    read = read_constraint(None, [pod("a", **SLICE_PAIR), pod("b", **SLICE_PAIR)])
    assert read.slices == (SliceLayer(names.RACK_LABEL, 2),)
    assert read.required == ("example.com/block",)


def test_kueues_multi_layer_slices_are_read_widest_first() -> None:
    layered = {names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION:
               '[{"topology": "example.com/block", "size": "8"},'
               ' {"topology": "topology.kubernetes.io/rack", "size": 4},'
               ' {"topology": "kubernetes.io/hostname", "size": 2}]'}
    assert read_constraint(None, [pod("a", **layered)]).slices == (
        SliceLayer("example.com/block", 8), SliceLayer(names.RACK_LABEL, 4),
        SliceLayer(names.HOSTNAME_LABEL, 2))


def test_slices_on_the_pod_group_are_read_like_the_pods() -> None:
    group = make_pod_group_dict("g", 2, "ns", annotations=SLICE_PAIR)
    assert read_constraint(group, [pod("a"), pod("b")]).slices == (
        SliceLayer(names.RACK_LABEL, 2),)


@pytest.mark.parametrize(("annotations", "reason"), [
    ({names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "rack"},
     f"{names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION} needs {names.KUEUE_SLICE_SIZE_ANNOTATION}"),
    ({names.KUEUE_SLICE_SIZE_ANNOTATION: "2"},
     f"{names.KUEUE_SLICE_SIZE_ANNOTATION} needs {names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION}"),
    ({names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
      names.KUEUE_SLICE_SIZE_ANNOTATION: "0"}, "expected a positive number of pods, got '0'"),
    ({names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION: "[{"}, "is not JSON"),
    ({names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION: "[]"}, "expected a list of 1 to 3"),
    ({names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION:
      '[{"topology": "rack", "size": 4}, {"topology": "node", "size": 3}]'},
     "[1].size: 3 does not divide the size 4 of the layer above"),
    ({names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION:
      '[{"topology": "rack", "size": 4}, {"topology": "rack", "size": 2}]'},
     "[1].topology: rack is already a layer above"),
    ({names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION: '[{"topology": "rack", "size": 2}]',
      names.KUEUE_SLICE_SIZE_ANNOTATION: "2"}, "state one form"),
])
def test_a_malformed_slice_annotation_is_an_error_naming_it(
        annotations: dict[str, str], reason: str) -> None:
    read = read_constraint(None, [pod("a", **annotations)])
    assert reason in read.error and "pod ns/a" in read.error
    with pytest.raises(TopologyError):
        attempts((RACK,), read)


def test_slice_annotations_are_carried_from_a_workload() -> None:
    job = {"metadata": {"annotations": {**SLICE_PAIR, "other": "x"}}}
    assert stated_annotations(None, job) == SLICE_PAIR


def test_a_group_of_podsets_is_read_from_the_pods_or_the_pod_group() -> None:
    named = {names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"}
    assert read_constraint(None, [pod("a", **named), pod("b", **named)]).podset_group == "lw"
    group = make_pod_group_dict("g", 2, "ns", annotations=named)
    assert read_constraint(group, [pod("a")]).podset_group == "lw"
    assert read_constraint(None, [pod("a")]).podset_group == ""


def test_a_pod_group_and_pods_naming_two_groups_of_podsets_is_an_error() -> None:
    group = make_pod_group_dict("g", 1, "ns",
                                annotations={names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"})
    read = read_constraint(group, [pod("a", **{names.KUEUE_PODSET_GROUP_ANNOTATION: "other"})])
    assert "pod ns/a: annotation kueue.x-k8s.io/podset-group-name is other" in read.error
    assert "already names lw" in read.error
