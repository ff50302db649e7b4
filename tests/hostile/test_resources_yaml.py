"""Hostile resources.yaml files: each is refused with an error naming the file and what is wrong.

The same parser serves the scheduler, the webhook and the device plugin, so a case
here holds for all three. Every case also goes through the file path
(``load_resource_config``), where encoding and size are checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_core.errors import ResourceConfigError
from fluence_core.resource_config import load_resource_config, parse_resource_config
from tests.hostile.cases import Case, cases

ONE = "resources:\n  - type: qpu\n"


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\nresources: []\n"


CASES = [
    # -- not YAML, or not the expected shape ------------------------------------------
    Case("not-yaml", "resources: [\n", "not valid YAML"),
    Case("tab-indent", "resources:\n\t- type: qpu\n", "not valid YAML"),
    Case("a-list", "- type: qpu\n", "expected a mapping"),
    Case("a-string", "qpu\n", "expected a mapping"),
    Case("a-number", "42\n", "expected a mapping"),
    Case("no-resources-key", "attributes: {}\n", "no 'resources' key"),
    Case("unknown-top-key", "resources: []\nextra: 1\n", r"unknown top-level keys \['extra'\]"),
    Case("resources-a-mapping", "resources: {type: qpu}\n", "resources: expected a list"),
    Case("resources-a-string", "resources: qpu\n", "resources: expected a list"),
    Case("entry-a-string", "resources: [qpu]\n", r"resources\[0\]: expected a mapping"),
    Case("entry-a-list", "resources: [[qpu]]\n", r"resources\[0\]: expected a mapping"),
    Case(
        "unknown-entry-key",
        "resources: [{type: qpu, colour: red}]\n",
        r"resources\[0\]: unknown keys \['colour'\]",
    ),
    Case(
        "duplicate-key",
        "resources:\n  - type: qpu\n    type: qdevice\n",
        "key 'type' appears twice",
    ),
    Case("duplicate-top-key", "resources: []\nresources: []\n", "key 'resources' appears twice"),
    # -- types ------------------------------------------------------------------------
    Case("missing-type", "resources: [{name: x}]\n", r"resources\[0\]: missing 'type'"),
    Case("empty-type", "resources: [{type: ''}]\n", r"resources\[0\]: missing 'type'"),
    Case("type-dotdot", "resources: [{type: ..}]\n", r"type '\.\.' must be at most 63"),
    Case("type-slash", "resources: [{type: a/b}]\n", r"type 'a/b' must be"),
    Case("type-path", "resources: [{type: ../../etc}]\n", "type '../../etc' must be"),
    Case("type-space", "resources: [{type: 'q pu'}]\n", "type 'q pu' must be"),
    Case("type-leading-dash", "resources: [{type: -qpu}]\n", "type '-qpu' must be"),
    Case("type-trailing-dot", "resources: [{type: qpu.}]\n", r"type 'qpu\.' must be"),
    Case("type-unicode", "resources: [{type: qpü}]\n", "type 'qpü' must be"),
    Case("type-nul", 'resources: [{type: "q\\0pu"}]\n', "type .* must be"),
    Case("type-newline", 'resources: [{type: "q\\npu"}]\n', "type .* must be"),
    Case("type-too-long", "resources: [{type: " + "q" * 64 + "}]\n", "must be at most 63"),
    Case("type-a-number", "resources: [{type: 7}]\n", r"type must be a string, got 7 \(quote it\)"),
    Case("type-a-bool", "resources: [{type: true}]\n", "type must be a string, got True"),
    Case("type-a-list", "resources: [{type: [qpu]}]\n", "type must be a string"),
    Case("type-a-mapping", "resources: [{type: {a: 1}}]\n", "type must be a string"),
    # -- names --------------------------------------------------------------------------
    Case("name-slash", "resources: [{type: qpu, name: a/b}]\n", "name 'a/b' must be"),
    Case("name-dotdot", "resources: [{type: qpu, name: ..}]\n", r"name '\.\.' must be"),
    Case(
        "name-too-long", "resources: [{type: qpu, name: " + "n" * 70 + "}]\n", "must be at most 63"
    ),
    Case("name-number", "resources: [{type: qpu, name: 12}]\n", "name must be a string, got 12"),
    Case(
        "duplicate-backend",
        "resources: [{type: qpu, name: a}, {type: qpd, name: a}]\n",
        r"resources\[1\]: name 'a' is already used by resources\[0\]",
    ),
    Case(
        "duplicate-default-name",
        "resources: [{type: qpu}, {type: qpu}]\n",
        "name 'qpu' is already used",
    ),
    Case(
        "duplicate-child",
        "resources:\n  - type: d\n    with: [{type: qpu}, {type: qpu}]\n",
        r"resources\[0\]\.with\[1\]: name 'qpu' is already used",
    ),
    # -- counts -------------------------------------------------------------------------
    Case("count-zero", "resources: [{type: qpu, count: 0}]\n", "count must be an integer from 1"),
    Case("count-negative", "resources: [{type: qpu, count: -1}]\n", "got -1"),
    Case("count-huge", "resources: [{type: qpu, count: 1000000000}]\n", "got 1000000000"),
    Case("count-float", "resources: [{type: qpu, count: 1.5}]\n", "got 1.5"),
    Case("count-string", "resources: [{type: qpu, count: '3'}]\n", "got '3'"),
    Case("count-yaml11-sexagesimal", "resources: [{type: qpu, count: 1:30}]\n", "got '1:30'"),
    Case("count-underscore", "resources: [{type: qpu, count: 4_000}]\n", "got '4_000'"),
    Case("count-bool", "resources: [{type: qpu, count: true}]\n", "got True"),
    Case("count-inf", "resources: [{type: qpu, count: .inf}]\n", "got inf"),
    Case(
        "count-long-int",
        "resources: [{type: qpu, count: " + "9" * 5000 + "}]\n",
        "integer longer than 64 digits",
    ),
    Case(
        "tree-too-big",
        "resources:\n  - type: a\n    count: 10000\n    with: [{type: b, count: 10000}]\n",
        "expand to 100010000 virtual vertices",
    ),
    # -- parents ------------------------------------------------------------------------
    Case(
        "parent-on-child",
        "resources:\n  - type: d\n    with: [{type: q, parent: n0}]\n",
        "'parent' is only allowed on top-level entries",
    ),
    Case(
        "parent-bad-name",
        "resources: [{type: q, parent: 'N0_bad'}]\n",
        "parent 'N0_bad' is neither 'cluster' nor a valid node name",
    ),
    Case("parent-number", "resources: [{type: q, parent: 3}]\n", "parent '3' is neither"),
    Case("parent-path", "resources: [{type: q, parent: ../n0}]\n", "parent '../n0' is neither"),
    # -- attributes ---------------------------------------------------------------------
    Case(
        "attributes-list",
        "resources: [{type: q, attributes: [a]}]\n",
        r"attributes: expected a mapping",
    ),
    Case(
        "attribute-nested",
        "resources: [{type: q, attributes: {a: {b: 1}}}]\n",
        "attribute values must be scalars",
    ),
    Case(
        "attribute-key-number",
        "resources: [{type: q, attributes: {1: x}}]\n",
        "attribute key must be a string, got 1",
    ),
    Case(
        "attribute-key-space",
        "resources: [{type: q, attributes: {'a b': x}}]\n",
        "attribute key 'a b' must be",
    ),
    Case(
        "attribute-key-too-long",
        "resources: [{type: q, attributes: {" + "k" * 59 + ": x}}]\n",
        "must be at most 58",
    ),
    Case(
        "attribute-key-backend",
        "resources: [{type: q, attributes: {backend: x}}]\n",
        "'backend' is set by Fluence itself",
    ),
    Case(
        "attribute-collision-dash-underscore",
        "resources: [{type: q, attributes: {a-b: x, a_b: y}}]\n",
        "attribute keys 'a-b' and 'a_b' both become the environment variable FLUXION_A_B",
    ),
    Case(
        "attribute-collision-case",
        "resources: [{type: q, attributes: {A.B: x, a-b: y}}]\n",
        "both become the environment variable FLUXION_A_B",
    ),
    Case(
        "attribute-collision-across-entries",
        "resources: [{type: q, attributes: {x.y: 1}}, {type: r, attributes: {X_Y: 2}}]\n",
        "'x.y' and 'X_Y' both become",
    ),
    Case(
        "attribute-value-too-long",
        "resources: [{type: q, attributes: {a: " + "v" * 1100 + "}}]\n",
        "printable text of at most 1024",
    ),
    Case(
        "attribute-value-newline",
        'resources: [{type: q, attributes: {a: "x\\ny"}}]\n',
        "printable text",
    ),
    Case(
        "registry-unknown",
        "resources: [{type: q, attributes: nope}]\n",
        "unknown attributes 'nope'",
    ),
    Case(
        "registry-a-list",
        "attributes: [a]\nresources: []\n",
        "attributes: expected a mapping of named attribute sets",
    ),
    Case(
        "registry-name-bad",
        "attributes: {'a b': {x: 1}}\nresources: []\n",
        "attribute set name 'a b' must be",
    ),
    Case(
        "registry-entry-scalar",
        "attributes: {aws: 3}\nresources: []\n",
        "attributes.aws: expected a mapping of attribute values",
    ),
    # -- nesting and expansion ---------------------------------------------------------
    Case("with-a-mapping", "resources: [{type: q, with: {type: r}}]\n", r"\.with: expected a list"),
    Case(
        "with-too-deep",
        "resources:\n"
        + "".join(
            "  " * i + "  - type: t" + str(i) + "\n" + "  " * i + "    with:\n" for i in range(33)
        )
        + "  " * 33
        + "  - type: leaf\n",
        "nested deeper than",
    ),
    Case("alias-bomb", _bomb(9), "expands to more than"),
    Case(
        "alias-recursive",
        "a: &a [*a]\nresources: []\n",
        "alias refers to a collection inside itself",
    ),
    Case("flow-too-deep", "resources: " + "[" * 70 + "]" * 70 + "\n", "nested deeper"),
]


@pytest.mark.parametrize("case", cases(CASES))
def test_a_hostile_resources_text_is_refused_naming_what_is_wrong(case: Case) -> None:
    with pytest.raises(ResourceConfigError, match=case.expect) as caught:
        parse_resource_config(case.input, "hostile.yaml")
    assert str(caught.value).startswith("hostile.yaml"), "the error names the file"


@pytest.mark.parametrize("case", cases(CASES))
def test_a_hostile_resources_file_is_refused_naming_the_file(case: Case, tmp_path: Path) -> None:
    path = tmp_path / "resources.yaml"
    path.write_text(case.input)
    with pytest.raises(ResourceConfigError, match=case.expect) as caught:
        load_resource_config(path)
    assert str(path) in str(caught.value)


BYTES_CASES = [
    Case("invalid-utf8", b"resources:\n  - type: q\xffpu\n", r"not UTF-8 text \(byte 22"),
    Case("latin1", "resources: [{type: qpü}]\n".encode("latin-1"), "not UTF-8"),
    Case("utf16", "resources: []\n".encode("utf-16"), "not UTF-8"),
    Case("nul-bytes", b"\x00" * 64, "not valid YAML"),
    Case("too-large", b"#" * (64 * 2**20 + 1), "larger than 67108864 bytes"),
]


@pytest.mark.parametrize("case", cases(BYTES_CASES))
def test_a_file_that_is_not_text_is_refused_naming_the_file(case: Case, tmp_path: Path) -> None:
    path = tmp_path / "resources.yaml"
    path.write_bytes(case.input)
    with pytest.raises(ResourceConfigError, match=case.expect) as caught:
        load_resource_config(path)
    assert str(path) in str(caught.value)


def test_yaml_1_1_booleans_stay_strings_so_a_type_named_yes_is_a_type() -> None:
    (resource,) = parse_resource_config("resources: [{type: yes}]\n").resources
    assert resource.type == "yes"


def test_the_valid_neighbour_of_every_case_still_loads() -> None:
    """The refusals are about the hostile part only: the plain file next to them loads."""
    assert parse_resource_config(ONE).types == ["qpu"]
