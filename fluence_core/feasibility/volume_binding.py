"""VolumeBinding: the pod's PersistentVolumeClaims must be usable from the node.

* A claim that does not exist, or is being deleted, fits no node.
* A bound claim's volume must exist and its node affinity must match the node.
* An unbound claim whose StorageClass binds immediately fits no node until the
  volume controller binds it ("pod has unbound immediate PersistentVolumeClaims").
* An unbound ``WaitForFirstConsumer`` claim fits a node where an available
  volume of its class can serve it (size, access modes, volume mode, selector,
  node affinity), or where its class can provision one (a provisioner other
  than ``kubernetes.io/no-provisioner`` whose ``allowedTopologies``, if any,
  match the node). Binding then goes the way kube-scheduler does it: the node
  is written on the claim (``volume.kubernetes.io/selected-node``) and the pod
  waits for the binding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fluence_core import hookimpl, names
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck, Refusal
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.feasibility.resources import amount
from fluence_core.feasibility.selectors import LabelSelector, NodeSelector, SelectorError
from fluence_core.kube.api import PERSISTENT_VOLUME_CLAIMS, STORAGE_CLASSES, KubeObject
from fluence_core.settings import Settings
from fluence_core.kube.meta import annotations_of, labels_of, metadata_of

if TYPE_CHECKING:  # the reserve hook's types, above this layer: named, never imported
    from fluence_core.models import Group
    from fluence_core.matcher.readback import PodPlacement
    from fluence_core.scheduler.context import SchedulingContext

WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
MISSING_VOLUME = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


def class_of(claim: KubeObject) -> str:
    spec = claim.get("spec") or {}
    annotations = annotations_of(claim)
    return str(spec.get("storageClassName")
               or annotations.get(names.STORAGE_CLASS_ANNOTATION) or "")


def _node_affinity(volume: KubeObject) -> NodeSelector | None:
    required = (((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required"))
    if required is None:
        return None
    name = metadata_of(volume).get("name")
    try:
        return NodeSelector.parse(required, f"persistentvolume {name}: nodeAffinity.required")
    except SelectorError as error:
        raise ValueError(str(error)) from None


def _fits_node(volume: KubeObject, node: NodeFacts) -> bool:
    affinity = _node_affinity(volume)
    return affinity is None or affinity.matches(node.name, node.labels)


def _storage(obj: Mapping[str, Any], where: str) -> int:
    return amount("storage", obj.get("storage", 0), where)


class _Claim:
    """An unbound WaitForFirstConsumer claim and the volumes that could serve it."""

    def __init__(self, key: str, claim: KubeObject, storage_class: KubeObject,
                 snapshot: Snapshot) -> None:
        spec = claim.get("spec") or {}
        self.key = key
        self.storage_class = storage_class
        wanted = _storage((spec.get("resources") or {}).get("requests") or {}, f"claim {key}")
        modes = set(spec.get("accessModes") or ())
        mode = spec.get("volumeMode") or "Filesystem"
        selector = LabelSelector.parse(spec.get("selector"), f"claim {key}: selector")
        namespace, name = key.split("/", 1)
        self.candidates = []
        for volume in snapshot.volumes.values():
            vspec = volume.get("spec") or {}
            ref = vspec.get("claimRef")
            if ref and (ref.get("namespace"), ref.get("name")) != (namespace, name):
                continue
            if (volume.get("status") or {}).get("phase") in ("Released", "Failed"):
                continue
            if str(vspec.get("storageClassName") or "") != class_of(claim):
                continue
            if (vspec.get("volumeMode") or "Filesystem") != mode:
                continue
            if not modes <= set(vspec.get("accessModes") or ()):
                continue
            vname = metadata_of(volume).get("name")
            if _storage(vspec.get("capacity") or {}, f"persistentvolume {vname}") < wanted:
                continue
            labels = labels_of(volume)
            if selector is not None and not selector.matches(labels):
                continue
            self.candidates.append(volume)

    def provisionable_on(self, node: NodeFacts) -> bool:
        if self.storage_class.get("provisioner") in (None, "", names.NO_PROVISIONER):
            return False
        topologies = self.storage_class.get("allowedTopologies") or ()
        if not topologies:
            return True
        return any(
            all(node.labels.get(e.get("key")) in (e.get("values") or ())
                for e in term.get("matchLabelExpressions") or ())
            for term in topologies
        )


class VolumeBinding:
    name = "VolumeBinding"
    reads_pods = True

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | Refusal | None:
        if not pod.claims:
            return None
        bound: list[KubeObject] = []
        missing_volume = False
        delayed: list[_Claim] = []
        for name in pod.claims:
            key = f"{pod.namespace}/{name}"
            claim = snapshot.claims.get(key)
            if claim is None:
                return Refusal(f'persistentvolumeclaim "{name}" not found')
            if metadata_of(claim).get("deletionTimestamp"):
                return Refusal(f'persistentvolumeclaim "{name}" is being deleted')
            volume_name = (claim.get("spec") or {}).get("volumeName")
            if volume_name:
                volume = snapshot.volumes.get(str(volume_name))
                if volume is None:
                    missing_volume = True
                else:
                    bound.append(volume)
                continue
            class_name = class_of(claim)
            storage_class = snapshot.storage_classes.get(class_name)
            if storage_class is None or storage_class.get(
                    "volumeBindingMode") != WAIT_FOR_FIRST_CONSUMER:
                return Refusal(UNBOUND_IMMEDIATE)
            delayed.append(_Claim(key, claim, storage_class, snapshot))

        def check(node: NodeFacts) -> tuple[str, ...]:
            if missing_volume:
                return (MISSING_VOLUME,)
            if not all(_fits_node(v, node) for v in bound):
                return (NODE_CONFLICT,)
            taken: set[str] = set()
            for claim in delayed:
                usable = [v for v in claim.candidates if _fits_node(v, node)
                          and metadata_of(v).get("name") not in taken]
                if usable:
                    taken.add(str(metadata_of(usable[0]).get("name")))
                elif not claim.provisionable_on(node):
                    return (BIND_CONFLICT,)
            return FINE

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in VolumeBinding filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [VolumeBinding()]


@hookimpl
def fluence_reserve(group: Group, placements: Mapping[str, PodPlacement],
                    ctx: SchedulingContext) -> None:
    """Write the chosen node on each unbound WaitForFirstConsumer claim, as kube-scheduler
    does before binding, so the provisioner makes the volume there."""
    for pod in group.pods:
        node = placements[pod.key].node
        if node is None:
            continue
        for name in pod.claims:
            claim = ctx.cluster.get(PERSISTENT_VOLUME_CLAIMS, name, pod.namespace)
            if claim is None or (claim.get("spec") or {}).get("volumeName"):
                continue
            annotations = annotations_of(claim)
            if annotations.get(names.SELECTED_NODE_ANNOTATION) == node:
                continue
            storage_class = ctx.cluster.get(STORAGE_CLASSES, class_of(claim))
            if (storage_class or {}).get("volumeBindingMode") != WAIT_FOR_FIRST_CONSUMER:
                continue
            ctx.cluster.patch(PERSISTENT_VOLUME_CLAIMS, name, {"metadata": {"annotations": {
                names.SELECTED_NODE_ANNOTATION: node}}}, pod.namespace)
