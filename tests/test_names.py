"""fluence_core.names: one module owns every shared name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.hybrid import boot


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



_LABEL_KEY = re.compile(r"[a-z0-9.-]*(?:kubernetes|k8s|flux-framework)\.(?:io|org)/[\w.-]*")
"""A label, annotation, taint or finalizer key (or its prefix) under a Kubernetes or Flux domain."""
_GROUP_VERSION = re.compile(r"[a-z0-9.-]+/v\d+(?:(?:alpha|beta)\d+)?")
"""An API group and version (``admission.k8s.io/v1``): a route to a kind, not a key."""
CORE = Path(__file__).resolve().parent.parent / "fluence_core"


def label_keys_in(source: str) -> list[tuple[int, str]]:
    """Every string literal of ``source`` that is a whole label-like key, with its line."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and _LABEL_KEY.fullmatch(node.value) and not _GROUP_VERSION.fullmatch(node.value)]


def test_label_keys_in_finds_keys_but_not_group_versions_or_prose() -> None:
    source = ('A = "batch.kubernetes.io/job-name"\nB = "admission.k8s.io/v1"\n'
              'C = "the kubernetes.io/hostname label"\nD = "kueue.x-k8s.io/podset-slice-size"\n')
    assert label_keys_in(source) == [(1, "batch.kubernetes.io/job-name"),
                                     (4, "kueue.x-k8s.io/podset-slice-size")]


def test_no_label_key_is_spelled_outside_names() -> None:
    stray = [f"{path.relative_to(CORE.parent)}:{line} {key!r}"
             for path in sorted(CORE.rglob("*.py")) if path != CORE / "names.py"
             for line, key in label_keys_in(path.read_text())]
    assert not stray, f"move these to fluence_core/names.py: {stray}"


def test_the_staged_boot_spells_the_environment_as_names_does() -> None:
    assert (boot._POD_UID_ENV, boot._LOG_LEVEL_ENV, boot._ATTR_PREFIX) == (
        names.ENV_POD_UID, names.ENV_LOG_LEVEL, names.ENV_ATTR_PREFIX)
