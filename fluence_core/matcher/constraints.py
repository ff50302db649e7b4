"""RFC 31 property constraints, compiled to predicates over a vertex.

Fluxion evaluates constraints on ``node``-typed vertices and matches a property
on its key alone; ``^key`` negates. ``hostlist`` matches the vertex name,
``ranks`` its rank, and ``and``/``or``/``not`` combine (``not`` negates the
conjunction of its list).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

from fluence_core.errors import MatcherError

Predicate = Callable[[str, frozenset[str], int], bool]
"""(vertex name, properties, rank) -> satisfied."""

_BRACKET = re.compile(r"^(.*?)\[([^\]]+)\](.*)$")
_PLAIN_NAMES = re.compile(r"[^\s\[\],\0]+(?:\0[^\s\[\],\0]+)*")
"""Names joined by NULs, none empty, none with a bracket, a comma or a space: each is its
own hostlist."""


def always(name: str, properties: frozenset[str], rank: int) -> bool:
    return True


def compile_constraint(constraint: Mapping[str, Any] | None) -> Predicate:
    """A predicate for an RFC 31 constraint object (``None`` or ``{}`` = no constraint)."""
    if not constraint:
        return always
    if not isinstance(constraint, Mapping):
        raise MatcherError(f"constraint must be an object, got {constraint!r}")
    parts = [_compile_operator(op, operand) for op, operand in constraint.items()]
    if len(parts) == 1:
        return parts[0]
    return lambda n, p, r: all(part(n, p, r) for part in parts)


def _compile_operator(op: str, operand: Any) -> Predicate:
    if op == "properties":
        required = frozenset(x for x in _strings(op, operand) if not x.startswith("^"))
        forbidden = frozenset(x[1:] for x in _strings(op, operand) if x.startswith("^"))
        return lambda n, p, r: required <= p and not (forbidden & p)
    if op == "hostlist":
        hosts = frozenset(expand_hostlists(_strings(op, operand)))
        return lambda n, p, r: n in hosts
    if op == "ranks":
        ranks = frozenset(i for item in _strings(op, operand) for i in expand_idset(item))
        return lambda n, p, r: r in ranks
    if op in ("and", "or", "not"):
        if not isinstance(operand, list):
            raise MatcherError(f"constraint {op!r} needs a list of constraints")
        inner = [compile_constraint(c) for c in operand]
        if op == "and":
            return lambda n, p, r: all(c(n, p, r) for c in inner)
        if op == "or":
            return lambda n, p, r: any(c(n, p, r) for c in inner)
        return lambda n, p, r: not all(c(n, p, r) for c in inner)
    raise MatcherError(f"unknown constraint operator {op!r}")


def _strings(op: str, operand: Any) -> list[str]:
    if not isinstance(operand, list) or not all(isinstance(x, str) for x in operand):
        raise MatcherError(f"constraint {op!r} needs a list of strings, got {operand!r}")
    return operand


def expand_idset(text: str) -> Iterable[int]:
    """``"0-3,7"`` -> 0, 1, 2, 3, 7."""
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            yield from range(int(low), int(high) + 1)
        else:
            yield int(part)


FEW_HOSTS = 64
"""A hostlist this short is walked node by node; a longer one is checked on the nodes a
matcher's own order offers."""


def few_hosts(constraints: Any, limit: int = FEW_HOSTS) -> list[str] | None:
    """The hosts a constraint names at its top (alone, or in an ``and``, or an ``and`` of
    ``and`` parts), when they are at most ``limit``; None otherwise (the predicate
    decides node by node). No other node can satisfy such a constraint, so a matcher may
    look at these alone."""
    if not isinstance(constraints, Mapping):
        return None
    hosts = constraints.get("hostlist")
    if isinstance(hosts, list) and len(hosts) <= limit and all(
            isinstance(h, str) for h in hosts):
        return expand_hostlists(hosts)
    if list(constraints) == ["and"] and isinstance(constraints["and"], list):
        for part in constraints["and"]:
            found = few_hosts(part, limit)
            if found is not None:
                return found
    return None


def expand_hostlists(items: list[str]) -> list[str]:
    """Every host of ``items``, each a hostlist, in order. A list of plain names (a feasible
    set's hostlist, hundreds of names per pod) is taken as it is, without a call per name."""
    if _PLAIN_NAMES.fullmatch("\0".join(items)):
        return list(items)
    return [name for item in items for name in expand_hostlist(item)]


def expand_hostlist(text: str) -> list[str]:
    """``"node[1-3,7],login"`` -> node1, node2, node3, node7, login (zero padding kept)."""
    if "[" not in text and "," not in text:  # one plain name: a feasible set's hostlist
        name = text.strip()
        return [name] if name else []
    hosts: list[str] = []
    for item in _split_top_level(text):
        match = _BRACKET.match(item)
        if not match:
            hosts.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for part in ranges.split(","):
            if "-" in part:
                low, high = part.split("-", 1)
                width = len(low) if low.startswith("0") else 0
                hosts.extend(
                    f"{prefix}{i:0{width}d}{suffix}" for i in range(int(low), int(high) + 1)
                )
            else:
                hosts.append(f"{prefix}{part}{suffix}")
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if current:
        items.append(current)
    return [i.strip() for i in items if i.strip()]
