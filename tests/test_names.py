"""fluence_core.names: one module owns every shared name."""

from __future__ import annotations

import pytest

from fluence_core import names


def test_scheduler_name_is_fluence() -> None:
    assert names.SCHEDULER_NAME == "fluence"


def test_group_label_lives_under_the_fluence_domain() -> None:
    assert names.GROUP_LABEL == "fluence.flux-framework.org/group"


@pytest.mark.parametrize(
    "name",
    [
        names.GROUP_SIZE_ANNOTATION,
        names.COORDINATION_ANNOTATION,
        names.REQUIRE_ANNOTATION_PREFIX,
        names.BACKEND_ANNOTATION,
        names.ATTR_ANNOTATION_PREFIX,
        names.JOBIDS_ANNOTATION,
        names.ALLOCATION_ANNOTATION,
        names.SCOUT_JOB_ID_ANNOTATION,
        names.SCOUT_SESSION_ANNOTATION,
    ],
)
def test_every_annotation_lives_under_the_fluence_domain(name: str) -> None:
    assert name.startswith("fluence.flux-framework.org/")


def test_design_names_are_spelled_as_documented() -> None:
    assert names.GROUP_SIZE_ANNOTATION == "fluence.flux-framework.org/group-size"
    assert names.COORDINATION_ANNOTATION == "fluence.flux-framework.org/coordination"
    assert names.REQUIRE_ANNOTATION_PREFIX == "fluence.flux-framework.org/require-"
    assert names.BACKEND_ANNOTATION == "fluence.flux-framework.org/backend"
    assert names.QUANTUM_GATE == "quantum.braket/ready"
    assert names.QUANTUM_PRIORITY_CLASS == "fluence-quantum-classical"
    assert names.ENV_BACKEND == "FLUXION_BACKEND"
    assert names.SETTINGS_ENV_PREFIX == "FLUENCE_"
    assert names.ENTRY_POINT_GROUP == "fluence"


def test_coordination_defaults_are_independent_and_shared() -> None:
    assert (names.COORDINATION_INDEPENDENT, names.COORDINATION_SHARED) == ("independent", "shared")


def test_extended_resource_is_under_the_fluxion_domain() -> None:
    assert names.extended_resource("qpu") == "fluxion.flux-framework.org/qpu"


def test_virtual_type_of_reads_back_an_extended_resource() -> None:
    assert names.virtual_type_of(names.extended_resource("qubit")) == "qubit"


@pytest.mark.parametrize(
    "resource", ["cpu", "memory", "nvidia.com/gpu", "fluxion.flux-framework.org/"]
)
def test_virtual_type_of_is_none_for_resources_that_are_not_virtual(resource: str) -> None:
    assert names.virtual_type_of(resource) is None


def test_class_property_is_class_equals_type() -> None:
    assert names.class_property("qpu") == "class=qpu"


def test_attribute_property_is_a_key_only_fluxion_property() -> None:
    assert (
        names.attribute_property("region", "us-east-1")
        == "fluxion.flux-framework.org/region=us-east-1"
    )


def test_virtual_markers_are_key_only_properties() -> None:
    assert (names.VIRTUAL_TRUE, names.VIRTUAL_FALSE) == ("virtual=true", "virtual=false")


def test_attr_annotation_prefixes_the_key() -> None:
    assert names.attr_annotation("region") == "fluence.flux-framework.org/attr-region"


@pytest.mark.parametrize(
    ("key", "env"),
    [
        ("region", "FLUXION_REGION"),
        ("qrmi_type", "FLUXION_QRMI_TYPE"),
        ("device.arn-x", "FLUXION_DEVICE_ARN_X"),
    ],
)
def test_env_name_for_attribute_is_upper_case_with_unsafe_characters_replaced(
    key: str, env: str
) -> None:
    assert names.env_name_for_attribute(key) == env
