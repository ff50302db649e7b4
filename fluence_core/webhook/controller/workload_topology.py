"""What a workload states about topology, carried onto the PodGroup the controller makes.

A user writes a topology constraint (Fluence's ``topology-required`` /
``topology-preferred``, Kueue's podset annotations) where they write the workload: on a
Job, on its pod template, on the JobSet that made the Job, or on the Kubeflow TrainJob
that made the JobSet. Only the pod template's annotations reach the pods; the others
would be lost. So the webhook's controller, when it makes a Job's PodGroup, puts there

* every such annotation the chain states (nearest first: pod template, Job, JobSet,
  TrainJob), which the scheduler reads on the PodGroup as on the pods, and
* the one required level as ``spec.schedulingConstraints.topology[0].key``, the 1.36
  field that kube-scheduler and other tools read too (kept by the API server only with
  the gate ``TopologyAwareWorkloadScheduling``; the annotations need no gate), and
* for a Job of a JobSet whose gangs share a group of PodSets, the JobSet's name, which
  scopes that group to it.

The owners are read (one GET each) only when the PodGroup is about to be made, and only
those a controlling owner reference names with its uid: a JobSet or TrainJob of that
name made again later is another object and states nothing for this Job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluence_core import names
from fluence_core.kube.api import JOBSETS, TRAINJOBS, ClusterAPI, Resource
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.stated_topology import scheduling_constraints, stated_annotations
from fluence_core.kube.meta import metadata_of
from fluence_core.webhook import pod_fields

OWNER_CHAIN: tuple[tuple[str, Resource], ...] = (("JobSet", JOBSETS), ("TrainJob", TRAINJOBS))
"""The controlling owners followed above a Job, in order."""


def owners_of_job(cluster: ClusterAPI, job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The Job's controlling JobSet and that JobSet's controlling TrainJob, as stored (as far
    as the chain goes; an owner that cannot be read ends it, logged)."""
    found: list[Mapping[str, Any]] = []
    namespace = str(metadata_of(job).get("namespace") or "")
    current: Mapping[str, Any] = job
    for kind, resource in OWNER_CHAIN:
        ref = pod_fields.controller_of(current, kind)
        if ref is None or not namespace:
            break
        name, uid = ref
        try:
            owner = cluster.get(resource, name, namespace)
        except ApiError as error:  # no such kind served here, no right to read it
            logger.info("webhook: cannot read %s %s/%s for its topology: %s", kind, namespace,
                        name, error)
            break
        if owner is None or metadata_of(owner).get("uid") != uid:
            break
        found.append(owner)
        current = owner
    return found


def stated_for_job(cluster: ClusterAPI | None, job: Mapping[str, Any]) -> dict[str, str]:
    """The topology annotations a Job's PodGroup carries (module docstring), and, when they
    name a group of PodSets, the workload that group belongs to: the Job's JobSet, whose
    other Jobs' gangs name the same group."""
    template = (job.get("spec") or {}).get("template") or {}
    owners = owners_of_job(cluster, job) if cluster is not None else []
    stated = stated_annotations(template, job, *owners)
    if names.KUEUE_PODSET_GROUP_ANNOTATION in stated and owners:
        stated[names.PODSET_GROUP_WORKLOAD_ANNOTATION] = (
            f"{OWNER_CHAIN[0][0]}/{metadata_of(owners[0]).get('name')}")
    return stated


def with_topology(body: dict[str, Any], stated: Mapping[str, str]) -> dict[str, Any]:
    """A PodGroup ``body`` given what the workload states: the annotations, and the required
    level in ``spec.schedulingConstraints`` (unless the body has its own)."""
    if not stated:
        return body
    metadata = body.setdefault("metadata", {})
    metadata.setdefault("annotations", {}).update(stated)
    constraints = scheduling_constraints(stated)
    spec = body.setdefault("spec", {})
    if constraints is not None and "schedulingConstraints" not in spec:
        spec["schedulingConstraints"] = constraints
    return body
