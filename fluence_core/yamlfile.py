"""Every YAML file Fluence reads goes through this strict, bounded loader.

PyYAML's safe loader speaks YAML 1.1, whose implicit types surprise people:
``type: yes`` becomes ``True``, ``count: 1:30`` becomes 90 (base 60), ``on:``
becomes a boolean key and ``2026-01-01`` a date. Fluence reads YAML 1.2's core
schema instead: only ``true``/``false`` are booleans, only ``null``/``~``/empty
is null, integers are decimal, ``0o`` octal or ``0x`` hex, and everything else
stays a string. A key written twice in one mapping is an error, not "last wins".

Input is bounded before it is built into Python objects (see
:mod:`fluence_core.limits`): the file's size, the nesting of collections, the
length of integers, and the number of nodes once aliases are expanded, so an
alias bomb ("billion laughs") is refused instead of handed on to code that walks it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from fluence_core import limits
from fluence_core.errors import FluenceError

MAX_INT_DIGITS = 64
"""Digits an integer scalar may have (Python refuses past 4300 digits, with a traceback)."""

_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML was built with it (ten times faster on node dumps)."""

_CORE_RESOLVERS: list[tuple[str, str, list[str]]] = [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", [*"~nN", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float",
     (r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
      r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789.")),
]


class YamlInputError(yaml.YAMLError):
    """YAML that parses but breaks a rule or a bound of Fluence's loader."""


class StrictLoader(_Base):  # type: ignore[valid-type,misc]
    """YAML 1.2 core schema, duplicate keys refused, size and aliases bounded."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0

    def construct_document(self, node: Node) -> Any:
        self._expanded += _check_shape(node, limits.MAX_YAML_NODES - self._expanded)
        return super().construct_document(node)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode):
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (list, dict)):
                    continue  # the base class refuses an unhashable key, naming the line
                if key in seen:
                    raise ConstructorError(None, None, f"key {key!r} appears twice in one mapping",
                                           key_node.start_mark)
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        if len(text) > MAX_INT_DIGITS:
            raise ConstructorError(None, None, f"integer longer than {MAX_INT_DIGITS} digits",
                                   node.start_mark)
        if text.startswith(("0o", "0x")):
            return int(text, 0)
        return int(text, 10)


for _tag, _pattern, _first in _CORE_RESOLVERS:
    StrictLoader.add_implicit_resolver(_tag, re.compile(_pattern), _first)
StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)


def _check_shape(root: Node, budget: int) -> int:
    """Nodes ``root`` expands to (aliases counted each time used); raises past the bounds.

    Iterative and post-order: each distinct node is measured once (its expanded size
    and height), so the check costs the size of the composed graph, not of its expansion.
    """
    measured: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            below = [measured[id(c)] for c in _children(node)]
            size = 1 + sum(s for s, _ in below)
            height = 1 + max((h for _, h in below), default=0)
            if size > budget:
                raise YamlInputError(f"the document expands to more than {limits.MAX_YAML_NODES}"
                                     f" nodes (aliases counted each time used){_where(node)}")
            if height > limits.MAX_YAML_DEPTH:
                raise YamlInputError(f"collections nested deeper than {limits.MAX_YAML_DEPTH}"
                                     f" levels{_where(node)}")
            measured[key] = (size, height)
            continue
        if key in measured:
            continue
        if key in on_path:
            raise YamlInputError(f"an alias refers to a collection inside itself{_where(node)}")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in measured)
    return measured[id(root)][0]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _where(node: Node) -> str:
    mark = node.start_mark
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def load(text: str) -> Any:
    """The one document in ``text``; raises ``yaml.YAMLError`` naming the line."""
    _check_size(text)
    loader = StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_all(text: str) -> list[Any]:
    """Every document in ``text``; raises ``yaml.YAMLError`` naming the line."""
    _check_size(text)
    loader = StrictLoader(text)
    try:
        documents = []
        while loader.check_data():
            documents.append(loader.get_data())
        return documents
    finally:
        loader.dispose()


def _check_size(text: str) -> None:
    if len(text) > limits.MAX_YAML_BYTES:
        raise YamlInputError(f"longer than {limits.MAX_YAML_BYTES} characters")


def read_text(path: Path | str) -> str:
    """A file's UTF-8 text, size-bounded; raises :class:`FluenceError` naming the file."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(limits.MAX_YAML_BYTES + 1)
    except OSError as error:
        raise FluenceError(f"{path}: cannot read: {error.strerror or error}") from None
    if len(data) > limits.MAX_YAML_BYTES:
        raise FluenceError(f"{path}: larger than {limits.MAX_YAML_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FluenceError(f"{path}: not UTF-8 text (byte {error.start}: {error.reason})") from None
