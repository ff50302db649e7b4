"""fluence_core.yamlfile: YAML 1.2 core schema, strict and bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_core import limits, yamlfile
from fluence_core.errors import FluenceError


@pytest.mark.parametrize(("text", "value"), [
    ("a: yes", "yes"), ("a: no", "no"), ("a: on", "on"), ("a: off", "off"), ("a: y", "y"),
    ("a: 1:30", "1:30"), ("a: 2026-01-01", "2026-01-01"), ("a: 1_000", "1_000"),
    ("a: 0o17", 15), ("a: 0x1F", 31), ("a: 0777", 777), ("a: -3", -3),
    ("a: true", True), ("a: False", False), ("a: ~", None), ("a: null", None), ("a:", None),
    ("a: 1.5", 1.5), ("a: 1e3", 1000.0), ("a: '1'", "1"),
])
def test_scalars_follow_the_yaml_1_2_core_schema(text: str, value: Any) -> None:
    assert yamlfile.load(text) == {"a": value}


def test_a_key_written_twice_is_an_error_naming_its_line() -> None:
    with pytest.raises(yaml.YAMLError, match=r"key 'a' appears twice(.|\n)*line 2"):
        yamlfile.load("a: 1\na: 2\n")


def test_merge_keys_are_plain_keys_as_in_yaml_1_2() -> None:
    assert yamlfile.load("<<: {a: 1}") == {"<<": {"a": 1}}


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 9)]
    with pytest.raises(yamlfile.YamlInputError, match="expands to more than"):
        yamlfile.load("\n".join(lines))


def test_aliases_within_the_bound_are_read() -> None:
    assert yamlfile.load("a: &x [1, 2]\nb: *x") == {"a": [1, 2], "b": [1, 2]}


def test_nesting_past_the_bound_is_refused() -> None:
    depth = limits.MAX_YAML_DEPTH + 1
    with pytest.raises(yamlfile.YamlInputError, match="nested deeper"):
        yamlfile.load("[" * depth + "]" * depth)


def test_an_integer_too_long_to_print_is_refused() -> None:
    with pytest.raises(yaml.YAMLError, match="integer longer than"):
        yamlfile.load("a: " + "9" * 5000)


def test_load_all_reads_every_document() -> None:
    assert yamlfile.load_all("a: 1\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]


def test_a_file_that_is_not_utf8_is_an_error_naming_file_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"a: \xff\n")
    with pytest.raises(FluenceError, match=r"bad.yaml: not UTF-8 text \(byte 3"):
        yamlfile.read_text(path)


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FluenceError, match="nothere.yaml: cannot read"):
        yamlfile.read_text(tmp_path / "nothere.yaml")
