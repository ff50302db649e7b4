"""fluence_core.names: one module owns every shared name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.hybrid import boot
from fluence_core.settings import SettingsVariables, env_names


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



_LABEL_KEY = re.compile(r"[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.[a-z]{2,}/[\w.-]*")
"""A key with a DNS prefix (label, annotation, taint, finalizer, extended resource), or the
prefix alone; an address such as ``10.0.0.0/24`` is none (its last part is no domain)."""
_GROUP_VERSION = re.compile(r"[a-z0-9.-]+/v\d+(?:(?:alpha|beta)\d+)?")
"""An API group and version (``admission.k8s.io/v1``): a route to a kind, not a key."""
_EXAMPLE_DOMAIN = "example.com/"
"""Reserved for examples (RFC 2606): the conformance suite's made-up labels, never real."""
_ENV_NAME = re.compile(r"(?:FLUENCE|FLUXION)_[A-Z0-9_]*")
"""One of Fluence's environment variables, or their prefix."""
CORE = Path(__file__).resolve().parent.parent / "fluence_core"
STANDALONE = (CORE / "hybrid" / "boot.py",)
"""Copied into user images, standard library only: it spells its variables itself, and
:func:`test_the_staged_boot_spells_the_environment_as_names_does` holds them to names.py."""


def _literals(source: str, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and pattern.fullmatch(node.value)]


def label_keys_in(source: str) -> list[tuple[int, str]]:
    """Every string literal of ``source`` that is a whole label-like key, with its line."""
    return [(line, key) for line, key in _literals(source, _LABEL_KEY)
            if not _GROUP_VERSION.fullmatch(key) and not key.startswith(_EXAMPLE_DOMAIN)]


def env_names_in(source: str) -> list[tuple[int, str]]:
    """Every string literal of ``source`` that is a whole Fluence variable name."""
    return _literals(source, _ENV_NAME)


def test_label_keys_in_finds_keys_but_not_group_versions_addresses_or_prose() -> None:
    source = ('A = "batch.kubernetes.io/job-name"\nB = "admission.k8s.io/v1"\n'
              'C = "the kubernetes.io/hostname label"\nD = "kueue.x-k8s.io/podset-slice-size"\n'
              'E = "10.0.0.0/24"\nF = "nvidia.com/gpu"\nG = "example.com/rack"\n')
    assert sorted(label_keys_in(source)) == [(1, "batch.kubernetes.io/job-name"),
                                             (4, "kueue.x-k8s.io/podset-slice-size"),
                                             (6, "nvidia.com/gpu")]


def test_env_names_in_finds_whole_names_but_not_prose() -> None:
    source = 'A = "FLUENCE_LOG_LEVEL"\nB = "set FLUENCE_LOG_LEVEL"\nC = "FLUXION_"\n'
    assert sorted(env_names_in(source)) == [(1, "FLUENCE_LOG_LEVEL"), (3, "FLUXION_")]


def test_no_label_key_is_spelled_outside_names() -> None:
    stray = [f"{path.relative_to(CORE.parent)}:{line} {key!r}"
             for path in sorted(CORE.rglob("*.py")) if path != CORE / "names.py"
             for line, key in label_keys_in(path.read_text())]
    assert not stray, f"move these to fluence_core/names.py: {stray}"


def test_no_environment_name_is_spelled_outside_names_and_settings() -> None:
    stray = [f"{path.relative_to(CORE.parent)}:{line} {name!r}"
             for path in sorted(CORE.rglob("*.py"))
             if path not in (CORE / "names.py", CORE / "settings.py", *STANDALONE)
             for line, name in env_names_in(path.read_text())]
    assert not stray, f"move these to fluence_core/names.py or settings.py: {stray}"


def test_the_staged_boot_spells_the_environment_as_names_does() -> None:
    assert (boot._POD_UID_ENV, boot._LOG_LEVEL_ENV, boot._ATTR_PREFIX) == (
        names.ENV_POD_UID, names.ENV_LOG_LEVEL, names.ENV_ATTR_PREFIX)


SETTING_VARIABLES = frozenset(variable for field in SettingsVariables.model_fields
                              for variable in env_names(SettingsVariables, field))
"""Every variable ``Settings`` reads (a pod's role or group, written by the webhook, is not
one: the runtime reads those from the pod's environment itself)."""


def settings_read_from_environ(source: str) -> list[tuple[int, str]]:
    """Every ``os.environ[names.X]``, ``os.environ.get(names.X, ...)`` or ``os.getenv(names.X)``
    of ``source`` whose ``X`` is the variable of a ``Settings`` field: read past ``Settings``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            key = node.slice
        elif isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith(
                ("environ.get", "getenv")):
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Attribute) and ast.unparse(key.value) == "names":
            if getattr(names, key.attr, None) in SETTING_VARIABLES:
                found.append((node.lineno, key.attr))
    return found


def test_settings_read_from_environ_finds_reads_of_a_setting_but_not_of_other_names() -> None:
    source = ("a = os.environ.get(names.ENV_LOG_LEVEL, 'INFO')\nb = environ[names.ENV_LOG_LEVEL]\n"
              "c = os.getenv(names.ENV_LOG_LEVEL)\nd = environ.get(names.ENV_ROLE)\n"
              "e = os.environ.get('HOME')\n")
    assert settings_read_from_environ(source) == [
        (1, "ENV_LOG_LEVEL"), (2, "ENV_LOG_LEVEL"), (3, "ENV_LOG_LEVEL")]


def test_no_setting_is_read_from_the_environment_past_settings() -> None:
    stray = [f"{path.relative_to(CORE.parent)}:{line} names.{name}"
             for path in sorted(CORE.rglob("*.py"))
             if path not in (CORE / "settings.py", *STANDALONE)
             for line, name in settings_read_from_environ(path.read_text())]
    assert not stray, f"read these through fluence_core.settings.Settings: {stray}"
