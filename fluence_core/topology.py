"""Topology: the levels of the resource graph, and what a group asks of them.

**Levels.** An ordered list of node labels, widest first (zone, block, rack), set in
``resources.yaml`` (``topology.levels``) or in ``FLUENCE_TOPOLOGY_LEVELS``. Each level
becomes a vertex type between the cluster and the nodes:
``cluster0 -> zone -> block -> rack -> node``. A level's type is the last part of its
label, or the ``type`` given; types are what jobspecs name (Fluxion's ``rack count:1``),
so they must differ from each other and from the graph's own types. A node without a
level's label sits in that level's domain :data:`~fluence_core.names.TOPOLOGY_UNKNOWN_DOMAIN`.
A domain is named by the label values from the widest level down to its own, so
``rack r1`` in two zones is two racks, as Kueue counts them. docs/topology.md has the
file's forms.

**Constraints.** A group may state a *required* level (it never spans two domains of it)
and a *preferred* one (tried first, then each wider level in turn). They come from where
users already write them, read by :mod:`fluence_core.stated_topology` (which reads
Kubernetes objects, so it sits above the Kubernetes boundary; this module is plain values
that the settings need). Several required levels are all kept by the narrowest (domains
nest). Without any constraint a group is still placed in the smallest domain that holds it
whole: the default prefers the narrowest level.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fluence_core import names
from fluence_core.errors import TopologyError

MAX_LEVELS = 16
"""As Kueue's Topology allows."""
RESERVED_TYPES = frozenset({
    "cluster", "node", "core", "gpu", "memory", "slot", "socket", "numanode", "millicores",
})
"""Vertex and jobspec types the graph or the matchers already use."""
_TYPE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_LABEL_PREFIX = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII
)
_LEVEL_KEYS = frozenset({"label", "type"})


@dataclass(frozen=True)
class Level:
    """One topology level: the node label that names its domains, and its vertex type."""

    label: str
    type: str


@dataclass(frozen=True)
class SliceLayer:
    """One layer of slices: every ``size`` consecutive pods of the group (of the layer above)
    stay inside one domain of ``key`` (a level's label or type, or any node label)."""

    key: str
    size: int


MAX_SLICE_LAYERS = 3
"""As Kueue's ``podset-slice-required-topology-constraints`` allows."""


@dataclass(frozen=True)
class Constraint:
    """What a group asks of the topology: levels as the user named them (label or type)."""

    required: tuple[str, ...] = ()
    preferred: tuple[str, ...] = ()
    unconstrained: bool = False
    """Kueue's ``podset-unconstrained-topology``: seek no domain, not even the default one."""
    source: str = ""
    """Where it was read, for messages (``PodGroup ns/g``, ``pod ns/p annotation ...``)."""
    error: str = ""
    """Why what the group states cannot be read (members disagree, a malformed field): the
    group is not matched, and waits with this reason (:func:`attempts` raises it)."""
    slices: tuple[SliceLayer, ...] = ()
    """Slices of the group, widest layer first; each layer's size divides the one above."""
    podset_group: str = ""
    """Kueue's ``podset-group-name``: the group shares one domain with the other gangs of its
    workload that name the same group (``fluence_core.scheduler.podset_groups``)."""

    @property
    def stated(self) -> bool:
        return bool(self.required or self.preferred or self.unconstrained or self.error
                    or self.slices)


NONE = Constraint()


def parse_levels(raw: Any, where: str) -> tuple[Level, ...]:
    """Validate a list of levels (``where`` names it in errors: ``resources.yaml:
    topology.levels``). Raises :class:`TopologyError` naming the entry."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise TopologyError(f"{where}: expected a list of node labels, widest level first")
    if len(raw) > MAX_LEVELS:
        raise TopologyError(f"{where}: at most {MAX_LEVELS} levels, got {len(raw)}")
    levels: list[Level] = []
    for i, entry in enumerate(raw):
        here = f"{where}[{i}]"
        vtype: Any = None
        if isinstance(entry, str):
            label: Any = entry
        elif isinstance(entry, dict):
            unknown = set(entry) - _LEVEL_KEYS
            if unknown:
                raise TopologyError(
                    f"{here}: unknown keys {sorted(unknown)} (expected: label, type)"
                )
            label, vtype = entry.get("label"), entry.get("type")
            if not isinstance(label, str):
                raise TopologyError(f"{here}.label: expected a node label, got {label!r}")
            if vtype is not None and not isinstance(vtype, str):
                raise TopologyError(f"{here}.type: expected a vertex type name, got {vtype!r}")
        else:
            raise TopologyError(f"{here}: expected a node label or {{label, type}}, got {entry!r}")
        levels.append(_level(label.strip(), vtype, here))
    _check_distinct(levels, where)
    return tuple(levels)


def parse_level_labels(text: str, where: str) -> tuple[Level, ...]:
    """Levels from a comma-separated list of labels (``FLUENCE_TOPOLOGY_LEVELS``)."""
    return parse_levels([part.strip() for part in text.split(",") if part.strip()], where)


def choose_levels(
    from_file: Sequence[Level], from_setting: Sequence[Level], file: str, setting: str
) -> tuple[Level, ...]:
    """The levels to use: the file's or the setting's; both set and different is an error."""
    if from_file and from_setting and tuple(from_file) != tuple(from_setting):
        raise TopologyError(
            f"{setting} ({', '.join(lv.label for lv in from_setting)}) and {file} "
            f"topology.levels ({', '.join(lv.label for lv in from_file)}) disagree; set one"
        )
    return tuple(from_file or from_setting)


def default_type(label: str) -> str:
    """A level's vertex type when none is given: the label's name part, lower case
    (``topology.kubernetes.io/rack`` is ``rack``, as Fluxion names that level)."""
    return label.rsplit("/", 1)[-1].lower().replace("_", "-").replace(".", "-")


def _level(label: str, vtype: str | None, here: str) -> Level:
    if not is_label_key(label):
        raise TopologyError(f"{here}: {label[:80]!r} is not a valid node label key")
    if label == names.HOSTNAME_LABEL:
        raise TopologyError(
            f"{here}: {label} is the node itself, already the level under every domain; "
            "list only the levels above nodes"
        )
    chosen = vtype.strip() if vtype is not None else default_type(label)
    where = f"{here}.type" if vtype is not None else here
    if not _TYPE.fullmatch(chosen) or len(chosen) > 63:
        raise TopologyError(
            f"{where}: vertex type {chosen!r} must be lower-case letters, digits and '-', "
            "starting with a letter" + ("" if vtype is not None else "; give one with 'type'")
        )
    if chosen in RESERVED_TYPES:
        raise TopologyError(
            f"{where}: vertex type {chosen!r} is one the graph already uses "
            f"({', '.join(sorted(RESERVED_TYPES))}); give another with 'type'"
        )
    return Level(label, chosen)


def is_label_key(key: str) -> bool:
    """Whether ``key`` is a valid label key (an optional DNS prefix, then a name)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _LABEL_PREFIX.fullmatch(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def _check_distinct(levels: Sequence[Level], where: str) -> None:
    seen_labels: dict[str, int] = {}
    seen_types: dict[str, int] = {}
    for i, level in enumerate(levels):
        if level.label in seen_labels:
            raise TopologyError(
                f"{where}[{i}]: label {level.label} is already level {seen_labels[level.label]}"
            )
        if level.type in seen_types:
            raise TopologyError(
                f"{where}[{i}]: type {level.type!r} is already level {seen_types[level.type]}'s "
                "(each level needs its own vertex type; give one with 'type')"
            )
        seen_labels[level.label] = i
        seen_types[level.type] = i


# -- domains -------------------------------------------------------------------------------


def domains_of(levels: Sequence[Level], labels: Mapping[str, str]) -> tuple[str, ...]:
    """A node's domain name at each level: its label value, or the unknown domain."""
    return tuple(labels.get(level.label) or names.TOPOLOGY_UNKNOWN_DOMAIN for level in levels)


def is_known(domain: Sequence[str]) -> bool:
    """Whether a domain (its names from the widest level down) is a real one: named by its
    own level's label. A rack with an unknown zone is a rack; an unknown rack is not."""
    return bool(domain) and domain[-1] != names.TOPOLOGY_UNKNOWN_DOMAIN


def level_index(levels: Sequence[Level], key: str) -> int | None:
    """The index of the level a user named by its label or its type, or None."""
    for i, level in enumerate(levels):
        if key in (level.label, level.type):
            return i
    return None


def attempts(levels: Sequence[Level], constraint: Constraint) -> list[int | None]:
    """The levels to match a group at, in turn (``None``: anywhere).

    The narrowest preferred level first (by default the narrowest level of all), then each
    wider one, down to the narrowest required level, which is never left; with nothing
    required, anywhere last. Keys that name no configured level are node labels
    (:func:`label_keys`), kept apart from the hierarchy. Raises :class:`TopologyError` for a
    key that is no label key either, or for a constraint that could not be read.
    """
    if constraint.error:
        raise TopologyError(constraint.error)
    required = _narrowest(levels, constraint.required, constraint.source)
    preferred = _narrowest(levels, constraint.preferred, constraint.source)
    if not levels:
        return [None]
    if constraint.unconstrained and not constraint.preferred:
        return [required] if required is not None else [None]
    start = preferred if preferred is not None else len(levels) - 1
    stop = required if required is not None else 0
    start = max(start, stop)
    tries: list[int | None] = list(range(start, stop - 1, -1))
    if required is None:
        tries.append(None)
    return tries


def _narrowest(levels: Sequence[Level], keys: Iterable[str], source: str) -> int | None:
    found: int | None = None
    for key in keys:
        index = level_index(levels, key)
        if index is None:
            _check_label_key(levels, key, source)
            continue
        found = index if found is None else max(found, index)
    return found


def _check_label_key(levels: Sequence[Level], key: str, source: str) -> None:
    if is_label_key(key):
        return
    configured = ", ".join(f"{lv.label} ({lv.type})" for lv in levels) or "none"
    raise TopologyError(
        f"{source}: topology key {key[:80]!r} is neither a configured level (levels: "
        f"{configured}) nor a node label key"
    )


@dataclass(frozen=True)
class LabelKeys:
    """The keys of a constraint that name no configured level: plain node labels, honoured
    as kube-scheduler honours ``schedulingConstraints.topology[].key`` (the group stays
    inside one set of nodes that share the label's value), outside the hierarchy."""

    required: tuple[str, ...] = ()
    preferred: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred)


def label_keys(levels: Sequence[Level], constraint: Constraint) -> LabelKeys:
    """The required and preferred keys of ``constraint`` that are not configured levels
    (each once, in the order stated). Raises :class:`TopologyError` for a key that is not a
    valid label key."""

    def outside(keys: Iterable[str]) -> tuple[str, ...]:
        found: dict[str, None] = {}
        for key in keys:
            if level_index(levels, key) is None:
                _check_label_key(levels, key, constraint.source)
                found.setdefault(key, None)
        return tuple(found)

    required = outside(constraint.required)
    return LabelKeys(required, tuple(k for k in outside(constraint.preferred)
                                     if k not in required))


def slice_error(constraint: Constraint, pods: int) -> str | None:
    """Why a group of ``pods`` cannot be cut into the slices ``constraint`` states (its size
    is not a multiple of the widest layer's), or None."""
    if not constraint.slices:
        return None
    size = constraint.slices[0].size
    if pods % size:
        return (f"{constraint.source}: the group has {pods} pods, not a multiple of its slice "
                f"size {size} ({constraint.slices[0].key}); it is never placed in part")
    return None
