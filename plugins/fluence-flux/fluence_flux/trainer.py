"""Kubeflow Trainer: is a JobSet the one Trainer made for a TrainJob with a Flux policy?

Trainer (``trainer.kubeflow.org/v1alpha1``) makes a JobSet for each TrainJob from
the template of its runtime, a namespaced ``TrainingRuntime`` or a
``ClusterTrainingRuntime`` named by ``spec.runtimeRef``, and owns it. A runtime
asks for Flux with ``spec.mlPolicy.flux`` (``numProcPerNode`` inside it), or,
as before, with the label ``trainer.kubeflow.org/framework: flux``. The sizes
follow Trainer's own precedence: the TrainJob's ``spec.trainer.numNodes`` and
``numProcPerNode`` override the runtime's ``mlPolicy.numNodes`` and
``mlPolicy.flux.numProcPerNode``. Where neither says, the JobSet's own counts
stand (Trainer writes ``numNodes`` there), else Trainer's default of one node.

Everything is read through the API at admission. A cluster without the Trainer
CRDs answers 404, which reads as "not a Trainer JobSet": nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluence_core.api import (
    TRAINJOBS,
    AdmissionContext,
    AdmissionDenied,
    Resource,
    labels_of,
    names,
)
from fluence_flux import workload as wl

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
TRAINING_RUNTIMES = Resource("trainingruntimes", "TrainingRuntime", group=GROUP, version=VERSION)
CLUSTER_TRAINING_RUNTIMES = Resource("clustertrainingruntimes", "ClusterTrainingRuntime",
                                     group=GROUP, version=VERSION, namespaced=False)
def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _positive(value: Any, where: str) -> int | None:
    """``value`` as a positive count, None when unset; anything else is refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).isdigit()):
        raise AdmissionDenied(f"{where}={value!r} must be a positive integer for Flux")
    count = int(value)
    if count < 1:
        raise AdmissionDenied(f"{where}={value!r} must be a positive integer for Flux")
    return count


def runtime_of(trainjob: Mapping[str, Any], namespace: str,
               ctx: AdmissionContext) -> tuple[str, Mapping[str, Any] | None]:
    """(``Kind name`` for messages, the runtime object or None) of a TrainJob."""
    ref = _spec(trainjob).get("runtimeRef") or {}
    name = str(ref.get("name") or "")
    if ref.get("kind") == TRAINING_RUNTIMES.kind:
        resource = TRAINING_RUNTIMES
    else:
        resource = CLUSTER_TRAINING_RUNTIMES
    runtime = ctx.require_cluster().get(resource, name, namespace) if name else None
    return f"{resource.kind} {name}", runtime


def asks_for_flux(runtime: Mapping[str, Any]) -> bool:
    """``spec.mlPolicy.flux`` is set (an empty object counts), or the framework label says flux."""
    if isinstance((_spec(runtime).get("mlPolicy") or {}).get("flux"), Mapping):
        return True
    framework = labels_of(runtime).get(names.TRAINER_FRAMEWORK_LABEL)
    return framework == names.TRAINER_FRAMEWORK_FLUX


def flux_policy(obj: Mapping[str, Any], ctx: AdmissionContext) -> wl.TrainerSize | None:
    """The Flux policy of the TrainJob owning JobSet ``obj``; None when there is none."""
    ref = wl.trainer_owner(obj)
    if ref is None or ctx.cluster is None:
        return None
    name = str(ref.get("name") or "")
    trainjob = ctx.cluster.get(TRAINJOBS, name, ctx.namespace)
    if trainjob is None:
        return None  # no Trainer CRDs here, or the TrainJob is already gone
    where = f"TrainJob {ctx.namespace}/{name}"
    runtime_name, runtime = runtime_of(trainjob, ctx.namespace, ctx)
    if runtime is None or not asks_for_flux(runtime):
        return None
    policy = _spec(runtime).get("mlPolicy") or {}
    flux = policy.get("flux") if isinstance(policy.get("flux"), Mapping) else {}
    trainer = _spec(trainjob).get("trainer") or {}
    nodes = (_positive(trainer.get("numNodes"), f"{where} spec.trainer.numNodes")
             or _positive(policy.get("numNodes"), f"{runtime_name} spec.mlPolicy.numNodes"))
    tasks = (_positive(trainer.get("numProcPerNode"), f"{where} spec.trainer.numProcPerNode")
             or _positive(flux.get("numProcPerNode"),
                          f"{runtime_name} spec.mlPolicy.flux.numProcPerNode"))
    return wl.TrainerSize(nodes=nodes, tasks_per_node=tasks)
