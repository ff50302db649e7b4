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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluence_core import names
from fluence_core.errors import TopologyError
from fluence_core.kube.meta import annotations_of, metadata_of
from fluence_core.topology import Constraint, is_label_key


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
    annotations = annotations_of(obj)
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
