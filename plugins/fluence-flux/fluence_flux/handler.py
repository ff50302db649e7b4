"""Handler ``flux``: rewrite an opted-in Indexed Job or JobSet to run a Flux instance.

On CREATE the pod template gets, without touching the user's image:

* an init container from the flux-view image running ``init.sh`` (copy Flux into
  the ``flux-view`` emptyDir, write the broker config for the job's hosts);
* on the Flux container: the ``flux-view`` mount, the ``flux-scripts`` mount (a
  projected volume of the ConfigMap ``<name>-flux`` with init.sh and
  entrypoint.sh, and the Secret ``<name>-flux-curve`` with the shared CURVE
  certificate) and command ``bash entrypoint.sh <the user's command...>``;
* a memory-backed ``/dev/shm``, a soft pod anti-affinity (one pod per node) and
  optionally a required node affinity (setting ``FLUENCE_FLUX_NODE_AFFINITY``);
* networking: ``subdomain`` and a headless Service named for the Job (a JobSet
  gets ``network.enableDNSHostnames: true`` and its controller makes the Service).

The ConfigMap, Secret and Service are made by the webhook's controller from the
stored workload (:meth:`FluxHandler.reconcile`; the handler labels what it rewrote
with :data:`~fluence_core.api.names.FLUX_LABEL`, which the controller selects by),
owned by it from their creation, so the garbage collector deletes them with it.
Admission makes nothing (a forged review would make them in any namespace);
it only refuses a workload whose objects' names are taken by someone else's.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from typing import Any

from fluence_core.api import (
    CONFIGMAPS,
    JOBS,
    JOBSETS,
    SECRETS,
    SERVICES,
    AdmissionContext,
    AdmissionDenied,
    ClusterAPI,
    Conflict,
    FluenceError,
    Handler,
    JsonPatch,
    Resource,
    StoredContext,
    add_all_to_list,
    annotations_of,
    labels_of,
    logger,
    metadata_of,
    names,
    owner_references_of,
    pointer,
)
from fluence_flux import scripts, trainer
from fluence_flux import workload as wl
from fluence_flux.curve import curve_certificate
from fluence_flux.settings import FluxSettings

INIT_CONTAINER = "flux-view"
VIEW_VOLUME = "flux-view"
SCRIPTS_VOLUME = "flux-scripts"
SHM_VOLUME = "flux-shm"
SHM_PATH = "/dev/shm"
DEFAULT_SCHEDULER = "default-scheduler"
"""What the API server writes into a pod template without ``schedulerName``."""


def node_affinity_terms(setting: str) -> list[dict[str, Any]]:
    """``key=v1|v2,key2=v3`` as one node selector term (every expression must hold)."""
    expressions = []
    for part in (p.strip() for p in setting.split(",") if p.strip()):
        key, sep, values = part.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ValueError(f"FLUENCE_FLUX_NODE_AFFINITY term {part!r} is not key=value")
        expressions.append({"key": key.strip(), "operator": "In",
                            "values": [v.strip() for v in values.split("|") if v.strip()]})
    return [{"matchExpressions": expressions}] if expressions else []


class FluxHandler(Handler):
    """The ``flux`` webhook handler (Jobs and JobSets)."""

    name = "flux"
    order = 3
    """Before ``job-group`` (5): that handler then names the gang this one adds on a Job."""
    resources = ("batch/jobs", "jobset.x-k8s.io/jobsets")

    stored_selector = names.FLUX_LABEL
    """The controller hands :meth:`reconcile` the stored Jobs and JobSets carrying it."""
    REMEMBERED = 4096
    """Workloads (by uid) whose objects are known made: their later events cost no call."""

    def __init__(self, settings: FluxSettings | None = None) -> None:
        self.settings = settings or FluxSettings()
        self.node_terms = node_affinity_terms(self.settings.node_affinity)
        self._made: dict[str, None] = {}  # uids, oldest first

    def applies(self, obj: Mapping[str, Any]) -> bool:
        return wl.opted_in(obj) or (
            wl.kind_of(obj) == wl.JOBSET_KIND and wl.trainer_owner(obj) is not None
        )

    # -- reading ---------------------------------------------------------------------------

    def workload(self, obj: Mapping[str, Any], ctx: AdmissionContext) -> wl.FluxWorkload | None:
        """The workload, None when the object is not a Flux one after all (a non-flux TrainJob).

        A TrainJob's JobSet takes its node count and tasks per node from the
        TrainJob and its runtime; the annotation still wins for tasks per node.
        """
        policy = trainer.flux_policy(obj, ctx) if wl.kind_of(obj) == wl.JOBSET_KIND else None
        if policy is None:
            return wl.read(obj, ctx.namespace) if wl.opted_in(obj) else None
        found = wl.read(obj, ctx.namespace, trainer=policy)
        if (policy.tasks_per_node is not None
                and names.FLUX_TASKS_PER_NODE_ANNOTATION not in annotations_of(obj)):
            found = dataclasses.replace(found, tasks_per_node=policy.tasks_per_node)
        return found

    # -- mutating --------------------------------------------------------------------------

    def mutate(self, obj: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        work = self.workload(obj, ctx)
        if work is None:
            return []
        spec = work.template.get("spec") or {}
        if any(c.get("name") == INIT_CONTAINER for c in spec.get("initContainers") or []):
            return []  # already rewritten: a re-invocation
        base = pointer(*work.template_path) + "/spec"
        ops: JsonPatch = []
        if work.kind == wl.JOB_KIND:
            if not spec.get("subdomain"):
                ops.append({"op": "add", "path": base + "/subdomain", "value": work.subdomain})
        else:
            network = (obj.get("spec") or {}).get("network")
            if network is None:
                ops.append(
                    {"op": "add", "path": "/spec/network", "value": {"enableDNSHostnames": True}}
                )
            else:
                ops.append({"op": "add", "path": "/spec/network/enableDNSHostnames", "value": True})
        ops += self._job_shape(work)
        ops += self._gang(work, spec, base, ctx)
        ops += add_all_to_list(spec, base, "initContainers", [self._init_container()])
        mounts_shm = any(m.get("mountPath") == SHM_PATH for c in spec.get("containers") or []
                         for m in c.get("volumeMounts") or [])
        volumes: list[dict[str, Any]] = [
            {"name": VIEW_VOLUME, "emptyDir": {}},
            {"name": SCRIPTS_VOLUME, "projected": {"sources": [
                {"configMap": {"name": work.config_map, "items": [
                    {"key": "init.sh", "path": "init.sh", "mode": 0o755},
                    {"key": "entrypoint.sh", "path": "entrypoint.sh", "mode": 0o755}]}},
                {"secret": {"name": work.secret, "items": [
                    {"key": "curve.cert", "path": "curve.cert", "mode": 0o444}]}}]}},
        ]
        if not mounts_shm:
            volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory",
                                                            "sizeLimit": self.settings.shm_size}})
        ops += add_all_to_list(spec, base, "volumes", volumes)
        ops += self._container(work, base, mounts_shm)
        ops += self._affinity(work, spec, base, ctx)
        self._check_names(work, ctx)
        return ops + self._labelled(obj)

    @staticmethod
    def _labelled(obj: Mapping[str, Any]) -> JsonPatch:
        """The label the controller finds the stored workload by (:meth:`reconcile`)."""
        labels = metadata_of(obj).get("labels")
        if not isinstance(labels, Mapping):
            return [{"op": "add", "path": "/metadata/labels", "value": {names.FLUX_LABEL: "true"}}]
        if labels.get(names.FLUX_LABEL) == "true":
            return []
        return [{"op": "add", "path": pointer("metadata", "labels", names.FLUX_LABEL),
                 "value": "true"}]

    @staticmethod
    def _job_shape(work: wl.FluxWorkload) -> JsonPatch:
        """An Indexed Job of ``nodes`` pods all at once (a Trainer JobSet may say otherwise)."""
        base = pointer(*work.job_path)
        want = {"completionMode": "Indexed", "completions": work.nodes, "parallelism": work.nodes}
        return [{"op": "replace" if key in work.job_spec else "add", "path": f"{base}/{key}",
                 "value": value}
                for key, value in want.items() if work.job_spec.get(key) != value]

    @staticmethod
    def _gang(work: wl.FluxWorkload, spec: Mapping[str, Any], base: str,
              ctx: AdmissionContext) -> JsonPatch:
        """One Fluence gang of every broker's pod, so no broker waits on a partial instance.

        The pods get ``schedulerName: fluence``, the group label (the workload's
        name unless the template names a group) and the group size; the built-in
        ``job-group`` and ``gang`` handlers then make the PodGroup from them. A
        template that names another scheduler keeps it, with a warning; the API
        server's default (``default-scheduler``, set before admission) is no choice.
        """
        scheduler = spec.get("schedulerName")
        if scheduler not in (None, "", DEFAULT_SCHEDULER, names.SCHEDULER_NAME):
            ctx.warn(f"flux: {work.label} keeps schedulerName {scheduler!r}: its brokers are "
                     "not placed as one gang by Fluence")
            return []
        ops: JsonPatch = []
        if scheduler != names.SCHEDULER_NAME:
            ops.append({"op": "add", "path": base + "/schedulerName",
                        "value": names.SCHEDULER_NAME})
        meta_path = pointer(*work.template_path, "metadata")
        meta = work.template.get("metadata")
        if meta is None:
            ops.append({"op": "add", "path": meta_path, "value": {}})
            meta = {}
        wanted = {"labels": {names.GROUP_LABEL: work.name},
                  "annotations": {names.GROUP_SIZE_ANNOTATION: str(work.nodes)}}
        for field, entries in wanted.items():
            current = meta.get(field)
            if current is None:
                ops.append({"op": "add", "path": f"{meta_path}/{field}", "value": dict(entries)})
                continue
            for key, value in entries.items():
                if key not in current:
                    ops.append({"op": "add", "path": meta_path + pointer(field, key),
                                "value": value})
        return ops

    def _init_container(self) -> dict[str, Any]:
        return {
            "name": INIT_CONTAINER,
            "image": self.settings.view_image,
            "command": ["/bin/bash", f"{scripts.SCRIPTS_DIR}/init.sh"],
            "volumeMounts": [
                {"name": VIEW_VOLUME, "mountPath": scripts.FLUX_ROOT},
                {"name": SCRIPTS_VOLUME, "mountPath": scripts.SCRIPTS_DIR, "readOnly": True},
            ],
        }

    def _container(self, work: wl.FluxWorkload, base: str, mounts_shm: bool) -> JsonPatch:
        containers = (work.template.get("spec") or {}).get("containers") or []
        container = containers[work.container_index]
        at = base + pointer("containers", work.container_index)
        ops: JsonPatch = [{"op": "replace", "path": at + "/command",
                           "value": ["/bin/bash", f"{scripts.SCRIPTS_DIR}/entrypoint.sh"]},
                          {"op": "replace" if "args" in container else "add", "path": at + "/args",
                           "value": list(work.argv)}]
        mounts: list[dict[str, Any]] = [{"name": VIEW_VOLUME, "mountPath": scripts.FLUX_ROOT},
                  {"name": SCRIPTS_VOLUME, "mountPath": scripts.SCRIPTS_DIR, "readOnly": True}]
        if not mounts_shm:
            mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
        return ops + add_all_to_list(container, at, "volumeMounts", mounts)

    def _affinity(self, work: wl.FluxWorkload, spec: Mapping[str, Any], base: str,
                  ctx: AdmissionContext) -> JsonPatch:
        term = {
            "weight": 100,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": dict(work.selector)},
                "topologyKey": names.HOSTNAME_LABEL,
            },
        }
        preferred = "preferredDuringSchedulingIgnoredDuringExecution"
        node = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": self.node_terms}
        }
        affinity = spec.get("affinity")
        if affinity is None:
            value: dict[str, Any] = {"podAntiAffinity": {preferred: [term]}}
            if self.node_terms:
                value["nodeAffinity"] = node
            return [{"op": "add", "path": base + "/affinity", "value": value}]
        ops: JsonPatch = []
        anti = affinity.get("podAntiAffinity")
        if anti is None:
            ops.append(
                {
                    "op": "add",
                    "path": base + "/affinity/podAntiAffinity",
                    "value": {preferred: [term]},
                }
            )
        elif anti.get(preferred) is None:
            ops.append(
                {
                    "op": "add",
                    "path": f"{base}/affinity/podAntiAffinity/{preferred}",
                    "value": [term],
                }
            )
        else:
            ops.append(
                {
                    "op": "add",
                    "path": f"{base}/affinity/podAntiAffinity/{preferred}/-",
                    "value": term,
                }
            )
        if self.node_terms:
            if affinity.get("nodeAffinity") is None:
                ops.append({"op": "add", "path": base + "/affinity/nodeAffinity", "value": node})
            else:
                ctx.warn(f"flux: {work.label} keeps its own node affinity; "
                         "FLUENCE_FLUX_NODE_AFFINITY is not added")
        return ops

    # -- side effects ----------------------------------------------------------------------

    def objects(self, work: wl.FluxWorkload) -> list[tuple[Resource, dict[str, Any]]]:
        """The ConfigMap, Secret and (for a Job) Service the workload needs, unowned."""
        meta_labels = {names.MANAGED_BY_LABEL: names.SCHEDULER_NAME, **work.selector}

        def meta(name: str) -> dict[str, Any]:
            return {"name": name, "namespace": work.namespace, "labels": dict(meta_labels),
                    "annotations": {names.FLUX_ANNOTATION: f"{work.kind}/{work.name}"}}

        cert = curve_certificate(work.name)
        made: list[tuple[Resource, dict[str, Any]]] = [
            (
                CONFIGMAPS,
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": meta(work.config_map),
                    "data": {
                        "init.sh": scripts.init_script(
                            work, self.settings.view_path, self.settings.broker_port
                        ),
                        "entrypoint.sh": scripts.entrypoint_script(
                            work, self.settings.start_timeout
                        ),
                    },
                },
            ),
            (
                SECRETS,
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": meta(work.secret),
                    "type": "Opaque",
                    "data": {"curve.cert": base64.b64encode(cert.encode()).decode()},
                },
            ),
        ]
        if work.owns_service:
            made.append(
                (
                    SERVICES,
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": meta(work.subdomain),
                        "spec": {
                            "clusterIP": "None",
                            "selector": dict(work.selector),
                            "publishNotReadyAddresses": True,
                            "ports": [{"name": "flux", "port": self.settings.broker_port}],
                        },
                    },
                )
            )
        return made

    def _check_names(self, work: wl.FluxWorkload, ctx: AdmissionContext) -> None:
        """Refuse a workload whose ConfigMap, Secret or Service name someone else's object
        holds (reads only: what is made is made from the stored workload)."""
        if ctx.cluster is None or ctx.dry_run:
            return
        for resource, body in self.objects(work):
            name = body["metadata"]["name"]
            existing = ctx.cluster.get(resource, name, work.namespace)
            if existing is not None and not _fluences(existing):
                raise AdmissionDenied(
                    f"{resource.kind} {work.namespace}/{name} exists and is not Fluence's; "
                    f"rename the {work.kind} or delete it"
                )

    # -- the stored workload ---------------------------------------------------------------

    def reconcile(self, obj: Mapping[str, Any], ctx: StoredContext) -> None:
        """Make the ConfigMap, Secret and Service of a stored workload this handler rewrote,
        owned by it; nothing for one being deleted, not rewritten (labelled by its user, not
        by this handler), or whose objects are made already."""
        meta = metadata_of(obj)
        uid, namespace = str(meta.get("uid") or ""), str(meta.get("namespace") or "")
        if not uid or not namespace or meta.get("deletionTimestamp") or uid in self._made:
            return
        admission = AdmissionContext(settings=ctx.settings, cluster=ctx.cluster,
                                     namespace=namespace)
        try:
            work = self.workload(obj, admission)
        except FluenceError as error:
            logger.warning("flux: stored %s %s/%s is not a Flux workload Fluence can run: %s",
                           obj.get("kind"), namespace, meta.get("name"), error)
            return
        spec = (work.template.get("spec") or {}) if work is not None else {}
        if work is None or not any(c.get("name") == INIT_CONTAINER
                                   for c in spec.get("initContainers") or []):
            return
        owner = JOBS if work.kind == wl.JOB_KIND else JOBSETS
        reference = {"apiVersion": owner.api_version, "kind": owner.kind,
                     "name": work.name, "uid": uid}
        cluster = ctx.cluster

        def make() -> None:
            for resource, body in self.objects(work):
                body["metadata"]["ownerReferences"] = [dict(reference)]
                self._ensure(cluster, resource, body, work, uid)
            self._made[uid] = None
            while len(self._made) > self.REMEMBERED:
                self._made.pop(next(iter(self._made)))

        ctx.make(("flux", namespace, work.name, uid),
                 f"Flux ConfigMap, Secret and Service for {work.label}", make)

    @staticmethod
    def _ensure(cluster: ClusterAPI, resource: Resource, body: dict[str, Any],
                work: wl.FluxWorkload, uid: str) -> None:
        name = body["metadata"]["name"]
        try:
            cluster.create(resource, body, work.namespace)
            logger.info("flux: created %s %s/%s", resource.kind, work.namespace, name)
            return
        except Conflict:
            pass
        existing = cluster.get(resource, name, work.namespace) or {}
        if not _fluences(existing):
            logger.error("flux: %s %s/%s exists and is not Fluence's: %s cannot start",
                         resource.kind, work.namespace, name, work.label)
            return
        owners = owner_references_of(existing)
        if any(isinstance(o, Mapping) and o.get("uid") == uid for o in owners):
            return  # made for this very workload already
        # A leftover of an earlier workload of the same name: take it over, fresh content.
        update: dict[str, Any] = {"metadata": {
            "ownerReferences": body["metadata"]["ownerReferences"],
            "annotations": body["metadata"]["annotations"]}}
        if "data" in body:
            update["data"] = body["data"]
        cluster.patch(resource, name, update, work.namespace)


def _fluences(obj: Mapping[str, Any]) -> bool:
    return bool(labels_of(obj).get(names.MANAGED_BY_LABEL) == names.SCHEDULER_NAME)
