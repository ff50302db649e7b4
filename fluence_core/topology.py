"""Topology: the levels of the resource graph, and what a group asks of them.

**Levels.** An ordered list of node labels, widest first (zone, block, rack), set in
``resources.yaml``::

    topology:
      levels:
        - topology.kubernetes.io/zone            # vertex type "zone"
        - label: example.com/block               # vertex type "block"
        - {label: example.com/rack, type: rack}

or in ``FLUENCE_TOPOLOGY_LEVELS`` (comma-separated labels). Each level becomes a vertex
type between the cluster and the nodes: ``cluster0 -> zone -> block -> rack -> node``. A
level's type is the last part of its label (``topology.kubernetes.io/zone`` is ``zone``),
or the ``type`` given; types are what jobspecs name (Fluxion's ``rack count:1``), so they
must differ from each other and from the graph's own types. A node without a level's label
sits in that level's domain :data:`~fluence_core.names.TOPOLOGY_UNKNOWN_DOMAIN`. A domain is
named by the label values from the widest level down to its own, so ``rack r1`` in two
zones is two racks, as Kueue counts them. No levels: the flat graph of before.

**Constraints.** A group may state a *required* level (it never spans two domains of it)
and a *preferred* one (tried first, then each wider level in turn). They come from where
users already write them (:func:`read_constraint`): the 1.36 PodGroup's
``spec.schedulingConstraints.topology[].key``, Kueue's podset annotations and Fluence's own
(:data:`~fluence_core.names.TOPOLOGY_REQUIRED_ANNOTATION`,
:data:`~fluence_core.names.TOPOLOGY_PREFERRED_ANNOTATION`). Several required levels are all
kept by the narrowest (domains nest). Without any constraint a group is still placed in the
smallest domain that holds it whole: the default prefers the narrowest level.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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

    @property
    def stated(self) -> bool:
        return bool(self.required or self.preferred or self.unconstrained or self.error)


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
    if not _is_label_key(label):
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


def _is_label_key(key: str) -> bool:
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
    required, anywhere last. Raises :class:`TopologyError` for a level the graph lacks, or
    for a constraint that could not be read.
    """
    if constraint.error:
        raise TopologyError(constraint.error)
    if not levels:
        if constraint.required:
            raise TopologyError(
                f"{constraint.source}: requires topology level {constraint.required[0]!r}, "
                "but no topology levels are configured (resources.yaml topology.levels or "
                "FLUENCE_TOPOLOGY_LEVELS)"
            )
        return [None]
    required = _narrowest(levels, constraint.required, constraint.source)
    if constraint.unconstrained and not constraint.preferred:
        return [required] if required is not None else [None]
    preferred = _narrowest(levels, constraint.preferred, constraint.source)
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
            raise TopologyError(
                f"{source}: topology level {key!r} is not configured (levels: "
                f"{', '.join(f'{lv.label} ({lv.type})' for lv in levels)})"
            )
        found = index if found is None else max(found, index)
    return found


# -- reading what a group states ---------------------------------------------------------------


def read_constraint(
    pod_group: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    template: Mapping[str, Any] | None = None,
) -> Constraint:
    """A group's constraint from its PodGroup, the Workload template it was made from, and
    its pods' annotations.

    Required: the PodGroup's ``spec.schedulingConstraints.topology[].key`` (else, when it
    names none, that of the ``template``: the 1.36 Workload's ``podGroupTemplates[]`` entry
    its ``spec.podGroupTemplateRef`` names, which controllers are expected to copy but may
    not have yet), Kueue's ``podset-required-topology`` and Fluence's ``topology-required``.
    Preferred: Kueue's ``podset-preferred-topology`` and Fluence's ``topology-preferred``.
    The annotations count on the PodGroup (where the webhook's controller carries what a
    Job, JobSet or TrainJob states) and on the pods. What cannot be read (members that
    disagree, a malformed field) becomes :attr:`Constraint.error`: reading never fails,
    matching refuses the group with that reason.
    """
    try:
        return _read_constraint(pod_group, pods, template)
    except TopologyError as error:
        return Constraint(error=str(error))


def _read_constraint(
    pod_group: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    template: Mapping[str, Any] | None,
) -> Constraint:
    stated = _Stated()
    if pod_group is not None:
        keys = _constraint_keys(pod_group.get("spec"), f"PodGroup {_name(pod_group)}", "spec.")
        if keys:
            stated.required.extend(keys)
            stated.sources.append(
                f"PodGroup {_name(pod_group)} spec.schedulingConstraints.topology")
        elif template is not None:
            where = template_source(pod_group)
            keys = _constraint_keys(template, where, "")
            if keys:
                stated.required.extend(keys)
                stated.sources.append(f"{where} schedulingConstraints.topology")
        stated.add(_own(pod_group), f"PodGroup {_name(pod_group)}")
    by_pods: dict[tuple[str, ...], str] = {}
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        own = tuple(
            f"{key}={str(annotations[key]).strip()}" for key in _ANNOTATIONS if key in annotations
        )
        by_pods.setdefault(own, _name(pod))
    if len(by_pods) > 1:
        (first, a), (second, b) = list(by_pods.items())[:2]
        raise TopologyError(
            f"members of one group state different topology: pod {a} has "
            f"{', '.join(first) or 'none'}, pod {b} has {', '.join(second) or 'none'}"
        )
    for entries, pod_name in by_pods.items():
        stated.add(entries, f"pod {pod_name}")
    return Constraint(tuple(stated.required), tuple(stated.preferred), stated.unconstrained,
                      "; ".join(stated.sources))


@dataclass
class _Stated:
    required: list[str] = field(default_factory=list)
    preferred: list[str] = field(default_factory=list)
    unconstrained: bool = False
    sources: list[str] = field(default_factory=list)

    def add(self, entries: Iterable[str], who: str) -> None:
        for entry in entries:
            key, _, value = entry.partition("=")
            if not value:
                raise TopologyError(f"{who}: annotation {key} is empty")
            if key in _REQUIRED:
                self.required.append(value)
            elif key in _PREFERRED:
                self.preferred.append(value)
            elif key == names.KUEUE_UNCONSTRAINED_TOPOLOGY_ANNOTATION:
                self.unconstrained = self.unconstrained or value.lower() == "true"
            self.sources.append(f"{who} annotation {key}")


def _own(obj: Mapping[str, Any]) -> tuple[str, ...]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return tuple(f"{key}={str(annotations[key]).strip()}" for key in _ANNOTATIONS
                 if key in annotations)


_REQUIRED = (names.TOPOLOGY_REQUIRED_ANNOTATION, names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION)
_PREFERRED = (names.TOPOLOGY_PREFERRED_ANNOTATION, names.KUEUE_PREFERRED_TOPOLOGY_ANNOTATION)
_ANNOTATIONS = (*_REQUIRED, *_PREFERRED, names.KUEUE_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
TOPOLOGY_ANNOTATIONS = _ANNOTATIONS
"""Every annotation a workload may state its topology with."""


def _constraint_keys(holder: Any, where: str, path: str) -> list[str]:
    """The keys of ``holder["schedulingConstraints"]["topology"]`` (a PodGroup's spec, a
    Workload's PodGroupTemplate); ``path`` is the holder's own, for messages."""
    constraints = holder.get("schedulingConstraints") if isinstance(holder, Mapping) else None
    topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
    if topology is None:
        return []
    if not isinstance(topology, list):
        raise TopologyError(f"{where}: {path}schedulingConstraints.topology is not a list")
    keys = []
    for i, entry in enumerate(topology):
        key = entry.get("key") if isinstance(entry, Mapping) else None
        if not isinstance(key, str) or not key:
            raise TopologyError(
                f"{where}: {path}schedulingConstraints.topology[{i}].key is missing or not a "
                "string"
            )
        keys.append(key)
    return keys


# -- what a workload states, carried to the objects the scheduler reads --------------------------


def template_ref(pod_group: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(Workload, podGroupTemplate)`` a PodGroup was made from
    (``spec.podGroupTemplateRef.workload``), None when it names none."""
    spec = pod_group.get("spec")
    ref = spec.get("podGroupTemplateRef") if isinstance(spec, Mapping) else None
    workload = ref.get("workload") if isinstance(ref, Mapping) else None
    if not isinstance(workload, Mapping):
        return None
    name, template = workload.get("workloadName"), workload.get("podGroupTemplateName")
    if not isinstance(name, str) or not name or not isinstance(template, str) or not template:
        return None
    return name, template


def template_source(pod_group: Mapping[str, Any]) -> str:
    """How messages name the Workload template a PodGroup was made from."""
    ref = template_ref(pod_group)
    if ref is None:
        return f"PodGroup {_name(pod_group)}"
    namespace = (pod_group.get("metadata") or {}).get("namespace")
    workload = f"{namespace}/{ref[0]}" if namespace else ref[0]
    return f"Workload {workload} podGroupTemplates[{ref[1]}]"


def workload_template(
    workload: Mapping[str, Any] | None, template: str
) -> Mapping[str, Any] | None:
    """The entry of a Workload's ``spec.podGroupTemplates`` named ``template``, or None."""
    spec = (workload or {}).get("spec")
    templates = spec.get("podGroupTemplates") if isinstance(spec, Mapping) else None
    for entry in templates if isinstance(templates, list) else ():
        if isinstance(entry, Mapping) and entry.get("name") == template:
            return entry
    return None


def stated_annotations(*objects: Mapping[str, Any] | None) -> dict[str, str]:
    """The topology annotations the given objects state, nearest first: a key the first
    object states wins over the same key on a later one (a Job's pod template, then the
    Job, its JobSet, its TrainJob)."""
    found: dict[str, str] = {}
    for obj in objects:
        annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        for key in _ANNOTATIONS:
            value = annotations.get(key)
            if key not in found and isinstance(value, str) and value.strip():
                found[key] = value.strip()
    return found


def scheduling_constraints(annotations: Mapping[str, str]) -> dict[str, Any] | None:
    """A PodGroup's ``spec.schedulingConstraints`` for what ``annotations`` require: the one
    required level as ``topology[0].key`` (the API allows one). None when nothing is
    required, or two different levels are (the annotations, carried too, keep both)."""
    required = {annotations[key] for key in _REQUIRED if key in annotations}
    if len(required) != 1:
        return None
    key = required.pop()
    return {"topology": [{"key": key}]} if _is_label_key(key) else None


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}".lstrip("/")
