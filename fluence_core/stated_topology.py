"""The topology a workload states, read from its Kubernetes objects.

Users state a group's topology where they already write it: the 1.36 PodGroup's
``spec.schedulingConstraints.topology[].key`` (or that of the Workload template the
PodGroup was made from), Kueue's podset annotations and Fluence's own
(:data:`~fluence_core.names.TOPOLOGY_REQUIRED_ANNOTATION`,
:data:`~fluence_core.names.TOPOLOGY_PREFERRED_ANNOTATION`). This module reads them into
a :class:`~fluence_core.topology.Constraint` (:func:`read_constraint`), and gives the
webhook what it carries from a workload to the PodGroup (:func:`stated_annotations`,
:func:`scheduling_constraints`).

It sits apart from :mod:`fluence_core.topology` because it reads Kubernetes objects
(through :mod:`fluence_core.kube.meta`), while the levels and the constraint are plain
values that the settings, far below the Kubernetes boundary, already need.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluence_core import names
from fluence_core.errors import TopologyError
from fluence_core.kube.meta import annotations_of, metadata_of
from fluence_core.topology import MAX_SLICE_LAYERS, Constraint, SliceLayer, is_label_key


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
    Slices: Kueue's slice annotations (:func:`read_slices`). The group of PodSets it shares
    a domain with: Kueue's ``podset-group-name``.
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
        annotations = annotations_of(pod)
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
                      "; ".join(stated.sources), slices=stated.slices,
                      podset_group=stated.podset_group)


@dataclass
class _Stated:
    required: list[str] = field(default_factory=list)
    preferred: list[str] = field(default_factory=list)
    unconstrained: bool = False
    sources: list[str] = field(default_factory=list)
    slices: tuple[SliceLayer, ...] = ()
    slices_from: str = ""
    podset_group: str = ""

    def add(self, entries: Iterable[str], who: str) -> None:
        own: dict[str, str] = {}
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
            elif key == names.KUEUE_PODSET_GROUP_ANNOTATION:
                if self.podset_group and self.podset_group != value:
                    raise TopologyError(f"{who}: annotation {key} is {value}, but the group "
                                        f"already names {self.podset_group}")
                self.podset_group = value
            else:
                own[key] = value
            self.sources.append(f"{who} annotation {key}")
        layers = read_slices(own, who)
        if not layers:
            return
        if self.slices and self.slices != layers:
            raise TopologyError(
                f"{self.slices_from} and {who} state different slices: "
                f"{_layers_text(self.slices)} and {_layers_text(layers)}")
        self.slices, self.slices_from = layers, who


def read_slices(annotations: Mapping[str, str], who: str) -> tuple[SliceLayer, ...]:
    """The slice layers Kueue's annotations state, widest first: the one-layer pair
    (``podset-slice-required-topology`` and ``podset-slice-size``) or the multi-layer JSON
    list (``podset-slice-required-topology-constraints``). Raises :class:`TopologyError`
    naming the annotation and ``who`` states it when the two forms are mixed, one half of
    the pair is missing, a size is not a positive integer, a layer's size does not divide
    the one above it, or a key repeats."""
    level = annotations.get(names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION)
    size = annotations.get(names.KUEUE_SLICE_SIZE_ANNOTATION)
    layered = annotations.get(names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION)
    if layered is not None:
        if level is not None or size is not None:
            raise TopologyError(
                f"{who}: {names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION} replaces "
                f"{names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION} and "
                f"{names.KUEUE_SLICE_SIZE_ANNOTATION}; state one form")
        return _layers(layered, who)
    if level is None and size is None:
        return ()
    if level is None or size is None:
        given, missing = ((names.KUEUE_SLICE_SIZE_ANNOTATION,
                           names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION) if level is None
                          else (names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
                                names.KUEUE_SLICE_SIZE_ANNOTATION))
        raise TopologyError(f"{who}: annotation {given} needs {missing} beside it")
    return (SliceLayer(level, _size(size, f"{who}: annotation "
                                          f"{names.KUEUE_SLICE_SIZE_ANNOTATION}")),)


def _layers(text: str, who: str) -> tuple[SliceLayer, ...]:
    where = f"{who}: annotation {names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION}"
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise TopologyError(f"{where} is not JSON ({error})") from None
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_SLICE_LAYERS:
        raise TopologyError(
            f"{where}: expected a list of 1 to {MAX_SLICE_LAYERS} "
            '{"topology": <node label>, "size": <pods>} entries, widest first')
    layers: list[SliceLayer] = []
    for i, entry in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(entry, Mapping) or set(entry) - {"topology", "size"}:
            raise TopologyError(f'{here}: expected {{"topology": ..., "size": ...}}, '
                                f"got {json.dumps(entry)[:80]}")
        key = entry.get("topology")
        if not isinstance(key, str) or not key.strip():
            raise TopologyError(f"{here}.topology: expected a node label, got {key!r}")
        layer = SliceLayer(key.strip(), _size(entry.get("size"), f"{here}.size"))
        if any(seen.key == layer.key for seen in layers):
            raise TopologyError(f"{here}.topology: {layer.key} is already a layer above")
        if layers and layers[-1].size % layer.size:
            raise TopologyError(f"{here}.size: {layer.size} does not divide the size "
                                f"{layers[-1].size} of the layer above")
        layers.append(layer)
    return tuple(layers)


def _size(raw: Any, where: str) -> int:
    text = str(raw).strip() if isinstance(raw, (str, int)) and not isinstance(raw, bool) else ""
    if not text.isdigit() or int(text) < 1:
        raise TopologyError(f"{where}: expected a positive number of pods, got {raw!r}")
    return int(text)


def _layers_text(layers: Sequence[SliceLayer]) -> str:
    return " > ".join(f"{layer.key} of {layer.size}" for layer in layers)


def _own(obj: Mapping[str, Any]) -> tuple[str, ...]:
    annotations = annotations_of(obj)
    return tuple(f"{key}={str(annotations[key]).strip()}" for key in _ANNOTATIONS
                 if key in annotations)


_REQUIRED = (names.TOPOLOGY_REQUIRED_ANNOTATION, names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION)
_PREFERRED = (names.TOPOLOGY_PREFERRED_ANNOTATION, names.KUEUE_PREFERRED_TOPOLOGY_ANNOTATION)
_SLICES = (names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, names.KUEUE_SLICE_SIZE_ANNOTATION,
           names.KUEUE_SLICE_CONSTRAINTS_ANNOTATION)
_ANNOTATIONS = (*_REQUIRED, *_PREFERRED, names.KUEUE_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
                *_SLICES, names.KUEUE_PODSET_GROUP_ANNOTATION)
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
    namespace = metadata_of(pod_group).get("namespace")
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
        annotations = annotations_of(obj or {})
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
    return {"topology": [{"key": key}]} if is_label_key(key) else None


def _name(obj: Mapping[str, Any]) -> str:
    meta = metadata_of(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}".lstrip("/")
