"""Built-in handler ``quantum``: split a shared-coordination quantum group into scout and workers.

A group asking for a virtual type with ``coordination: shared`` submits one quantum task,
from its **scout** (Job completion index 0); the classical **workers** wait, holding no
node, until the task is about to run. Why: a classical gang that holds its nodes through
a vendor's queue wastes them for as long as the queue is. :class:`QuantumSplitHandler`
says what each of the two pods gets; both carry the split's seal
(:class:`~fluence_core.webhook.admission.owned.Sealer`), the one proof, which role labels,
gates and class names a tenant writes are not, that a pod is a hybrid group's.

``independent`` groups (the default) are not this handler's: each pod submits its own
task, ungated. Admission itself makes and deletes nothing: the job controller's PodGroup
a split pod leaves behind is deleted by the webhook's controller
(:mod:`fluence_core.webhook.controller.controller`) once the split pod is stored.

The rest of the feature comes with this plugin (the scouts' report route and the orphan
sweep), so ``FLUENCE_DISABLE_PLUGINS=webhook-quantum``, or a ``FLUENCE_WEBHOOK_HANDLERS``
without ``quantum``, stops all of it (:func:`~fluence_core.webhook.plugins_left_out`).
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl, names
from fluence_core.kube.api import PRIORITY_CLASSES, ClusterAPI
from fluence_core.settings import SCOUT, SIDECAR, Settings
from fluence_core.webhook import cel
from fluence_core.webhook.admission import gangs
from fluence_core.webhook import pod_fields
from fluence_core.webhook.controller import pod_groups
from fluence_core.hybrid.claims import ClaimLookupError, published_key, qpu_claim_entries
from fluence_core.hybrid.credentials import copy_credentials
from fluence_core.hybrid.orphans import OrphanSweep
from fluence_core.hybrid.endpoint import ReportEndpoint
from fluence_core.kube.meta import labels_of, metadata_of
from fluence_core.kube.patch import JsonPatch, pointer
from fluence_core.webhook.admission.base import AdmissionContext, AdmissionDenied, Handler
from fluence_core.webhook.admission.owned import sealer_of
from fluence_core.webhook.admission.env import (
    add_all_to_list,
    add_env,
    add_to_list,
    annotation_env,
    field_env,
)

TOKEN_SECONDS = 3600
"""Lifetime of the sidecar's report token; the kubelet renews it at 80 % of that."""


def backend_env(attribute_keys: tuple[str, ...], *, claimed: bool = False,
                ) -> list[dict[str, Any]]:
    """``FLUXION_BACKEND`` and ``FLUXION_<ATTR>``, read from the backend annotations through the
    downward API (resolved by the kubelet when the container starts); ``claimed``: the
    annotations a claim's device gives, keyed as the QPU driver publishes the attributes
    (:func:`~fluence_core.hybrid.claims.claimed_backend`)."""
    return [annotation_env(names.ENV_BACKEND, names.BACKEND_ANNOTATION)] + [
        annotation_env(names.env_name_for_attribute(key),
                       names.attr_annotation(published_key(key) if claimed else key))
        for key in attribute_keys
    ]


def qpu_claims_of(pod: Mapping[str, Any], ctx: AdmissionContext) -> list[str]:
    """The pod's ``spec.resourceClaims`` entries that ask for a QPU, when it asks for none by
    the extended resource (that path leaves its claims alone); refused when it asks for
    neither, since a shared group exists to share one quantum task."""
    if pod_fields.asks_for_virtual(pod):
        return []
    cluster = ctx.require_cluster()
    entries = tuple(sorted(str(sorted(e.items())) for e in pod_fields.pod_spec(pod).get(
        "resourceClaims") or []))
    try:  # the pods of one Job name the same claims: read once for all of them
        found: list[str] = ctx.cached(("qpu-claims", ctx.namespace, entries),
                                      lambda: qpu_claim_entries(pod, ctx.namespace, cluster))
    except ClaimLookupError as error:
        raise AdmissionDenied(str(error)) from None
    if not found:
        raise AdmissionDenied(
            f"coordination {names.COORDINATION_SHARED!r} needs a quantum backend: the extended "
            f"resource {names.extended_resource('qpu')} or a claim of DeviceClass "
            f"{' or '.join(names.QPU_CLASSES)}; none of spec.resourceClaims asks for one")
    return found


class QuantumSplitHandler(Handler):
    """Splits a shared group's pod into the scout or a worker, by its completion index.

    * scout: PodGroup ``<group>-scout`` of one, never gated; an init container stages the
      interceptor (``fluence stage``) into an emptyDir that every app container mounts and
      finds on ``PYTHONPATH`` (its ``sitecustomize`` runs at interpreter start); a sidecar
      container (``fluence sidecar``) watches the vendor's queue and ungates the workers.
      The sidecar gets the app's ``env`` and ``envFrom`` references
      (:mod:`~fluence_core.hybrid.credentials`: the vendor credentials) and every setting it
      reads, at the webhook's values
      (:meth:`~fluence_core.settings.HybridSettings.pod_env`: among them where to report
      and the CA to trust); the app containers get the scout's. The pod
      keeps its own ServiceAccount, and nobody is granted anything: the sidecar holds no
      Kubernetes rights. It reports to Fluence with a projected ServiceAccount token of
      Fluence's audience, mounted here, and Fluence ungates the workers
      (docs/scout-report.md).
    * workers: PodGroup ``<group>`` of N-1, scheduling gate, priority class
      ``fluence-quantum-classical`` unless one is set, role and scout env, and no virtual
      request (the scout holds it). The containers that asked for it get
      ``FLUXION_BACKEND`` / ``FLUXION_<ATTR>`` from the backend annotations, which the
      release copies from the scout (:mod:`fluence_core.hybrid.release`).

    A QPU asked for by claim (:func:`qpu_claims_of`) goes the same way: the scout keeps the
    claim, and its sidecar uses it too (the kubelet plugin's CDI gives it the backend);
    the workers lose it, from ``spec.resourceClaims`` and their containers, and the
    containers that used it read the backend the release stamps from the scout's
    allocation. Why the scout alone: the backend is allocated, and held, from the
    scout's placement while the workers hold no node; a worker carrying a template's claim
    would get a backend of its own, and one carrying the shared claim would pin itself to
    the scout's allocation for no gain.

    A pod that arrives with the job controller's scheduling group is re-pointed (allowed
    at CREATE); that PodGroup, which would hold a gang of N the split never fills, is
    deleted by the controller only when its controller is the stored pod's own
    controlling Job (owner references, uid included).
    """

    name = "quantum"
    order = 10
    match_condition = cel.all_of(
        f"{cel.label(names.GROUP_LABEL)} != ''",
        f"{cel.annotation(names.COORDINATION_ANNOTATION)} == "
        f"{cel.quoted(names.COORDINATION_SHARED)}",
        cel.any_of(cel.asks_for_virtual(), cel.names_claims()),
        f"{cel.label(names.ROLE_LABEL)} == ''")
    """A shared group's pod asking for a virtual resource or naming claims, not split yet (a
    role says it is: a split worker no longer asks, and a pod with a role gets nothing here)."""

    def __init__(self, settings: Settings) -> None:
        self.image = settings.hybrid.runtime_image
        self.gate = settings.hybrid.quantum_gate
        self.audience = settings.hybrid.report_audience
        self.sidecar_settings = settings.hybrid.pod_env(SIDECAR)
        self.scout_settings = settings.hybrid.pod_env(SCOUT)

    def env_contract(self) -> list[tuple[str, str]]:
        return [
            (names.ENV_ROLE, f"'{names.ROLE_SCOUT}' or '{names.ROLE_WORKER}' (shared groups)"),
            (names.ENV_SCOUT_JOB_ID, f"annotation {names.SCOUT_JOB_ID_ANNOTATION} (workers)"),
            (names.ENV_SCOUT_SESSION, f"annotation {names.SCOUT_SESSION_ANNOTATION} (workers)"),
            (names.ENV_SCOUT_STATUS, f"annotation {names.SCOUT_STATUS_ANNOTATION} (workers)"),
            (names.ENV_BACKEND, f"annotation {names.BACKEND_ANNOTATION}, the scout's (workers)"),
            ("PYTHONPATH", f"{names.RUNTIME_MOUNT} prepended (scout)"),
        ]

    def applies(self, pod: Mapping[str, Any]) -> bool:
        return pod_fields.is_shared_quantum(pod)

    def mutate(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        if pod_fields.role(pod) is not None:
            return []  # split already: a re-invocation
        group = pod_fields.group_of(pod)
        assert group is not None
        index = pod_fields.completion_index(pod)
        if index is None:
            raise AdmissionDenied(
                f"coordination {names.COORDINATION_SHARED!r} needs the pods of an Indexed Job "
                f"(label {names.JOB_COMPLETION_INDEX}) to choose the scout"
            )
        size = gangs.group_size(pod, ctx)
        claims = qpu_claims_of(pod, ctx)
        ops: JsonPatch = []  # the group label exists, so metadata.labels does too
        if index == 0:
            target = group + names.SCOUT_GROUP_SUFFIX
            ops.append(self._label(names.ROLE_SCOUT))
            ops += self._scout(pod, group, size, ctx, ctx.resource_config.attribute_keys,
                               claims)
            gangs.check_pod_group(
                ctx, target, pod_groups.pod_group_min_count(target, group, size, names.ROLE_SCOUT))
        else:
            target = group
            ops.append(self._label(names.ROLE_WORKER))
            ops += self._worker(pod, ctx, claims)
            gangs.check_pod_group(
                ctx, target, pod_groups.pod_group_min_count(target, group, size, names.ROLE_WORKER))
        ops.append(
            {
                "op": "add",
                "path": pointer("spec", "schedulingGroup"),
                "value": {"podGroupName": target},
            }
        )
        ops.append(self._seal(pod, ctx, names.ROLE_SCOUT if index == 0 else names.ROLE_WORKER))
        return ops

    @staticmethod
    def _seal(pod: Mapping[str, Any], ctx: AdmissionContext, role: str) -> dict[str, Any]:
        """The split's seal on the pod it makes: what admission policy and the protected mark
        take as proof the pod is a hybrid group's
        (:class:`~fluence_core.webhook.admission.owned.Sealer`)."""
        meta = metadata_of(pod)
        split = {"metadata": {**meta, "labels": {**labels_of(pod), names.ROLE_LABEL: role}}}
        seal = sealer_of(ctx.state).seal(split, ctx.namespace)
        if meta.get("annotations") is None:
            return {"op": "add", "path": pointer("metadata", "annotations"),
                    "value": {names.SPLIT_SEAL_ANNOTATION: seal}}
        return {"op": "add", "path": pointer("metadata", "annotations",
                                             names.SPLIT_SEAL_ANNOTATION), "value": seal}

    @staticmethod
    def _label(value: str) -> dict[str, Any]:
        return {
            "op": "add",
            "path": pointer("metadata", "labels", names.ROLE_LABEL),
            "value": value,
        }

    def _scout(
        self, pod: Mapping[str, Any], group: str, size: int, ctx: AdmissionContext,
        attribute_keys: tuple[str, ...] = (), claims: list[str] | None = None,
    ) -> JsonPatch:
        spec = pod_fields.pod_spec(pod)
        ops: JsonPatch = []
        gates = spec.get("schedulingGates") or []
        for index in reversed(range(len(gates))):
            if gates[index].get("name") == self.gate:  # the scout is never gated
                ops.append({"op": "remove", "path": pointer("spec", "schedulingGates", index)})
        token = {
            "serviceAccountToken": {
                "audience": self.audience,
                "expirationSeconds": TOKEN_SECONDS,
                "path": names.REPORT_TOKEN_FILE,
            }
        }
        ops += add_all_to_list(spec, "/spec", "volumes", [
            {"name": names.RUNTIME_VOLUME, "emptyDir": {}},
            {"name": names.REPORT_TOKEN_VOLUME, "projected": {"sources": [token]}},
        ])
        mount = {"name": names.RUNTIME_VOLUME, "mountPath": names.RUNTIME_MOUNT}
        ops += add_to_list(
            spec,
            "/spec",
            "initContainers",
            {
                "name": names.STAGE_CONTAINER,
                "image": self.image,
                "command": ["fluence", "stage", names.RUNTIME_MOUNT],
                "volumeMounts": [mount],
            },
        )
        # The interceptor writes its job records into the runtime dir the sidecar reads.
        runtime = {"name": names.ENV_RUNTIME_DIR, "value": names.RUNTIME_MOUNT}
        pod_uid = field_env(names.ENV_POD_UID, "metadata.uid")
        for index, container in enumerate(spec.get("containers") or []):
            base = pointer("spec", "containers", index)
            ops += add_to_list(container, base, "volumeMounts", dict(mount))
            # One add_env per container: each op list is computed against the original.
            ops += self._pythonpath(container, base)
            ops += add_env(
                container,
                base,
                [
                    {"name": "PYTHONPATH", "value": names.RUNTIME_MOUNT},
                    {"name": names.ENV_ROLE, "value": names.ROLE_SCOUT},
                    pod_uid,
                    runtime,
                    *self.scout_settings,
                ],
            )
        env = [
            {"name": names.ENV_ROLE, "value": "sidecar"},
            {"name": names.ENV_GROUP, "value": group},
            {"name": names.ENV_GROUP_SIZE, "value": str(size)},
            *self.sidecar_settings,
            {"name": names.ENV_REPORT_TOKEN_FILE,
             "value": f"{names.REPORT_TOKEN_MOUNT}/{names.REPORT_TOKEN_FILE}"},
            runtime,
            field_env(names.ENV_POD_NAME, "metadata.name"),
            field_env(names.ENV_POD_NAMESPACE, "metadata.namespace"),
            pod_uid,
            # With a claim, the backend comes from the claim's CDI device, not annotations.
            *([] if claims else backend_env(attribute_keys)),
        ]
        credentials = copy_credentials(pod, {e["name"] for e in env})
        for warning in credentials.warnings:
            ctx.warn(warning)
        sidecar: dict[str, Any] = {
            "name": names.SIDECAR_CONTAINER,
            "image": self.image,
            "command": ["fluence", "sidecar"],
            # The app's references (minus the names set here), then the sidecar's own.
            "env": credentials.env + env,
            "volumeMounts": [
                dict(mount),
                {"name": names.REPORT_TOKEN_VOLUME, "mountPath": names.REPORT_TOKEN_MOUNT,
                 "readOnly": True},
            ],
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
        }
        if claims:
            sidecar["resources"]["claims"] = [{"name": name} for name in claims]
        if credentials.env_from:
            sidecar["envFrom"] = credentials.env_from
        ops += add_to_list(spec, "/spec", "containers", sidecar)
        return ops

    @staticmethod
    def _pythonpath(container: Mapping[str, Any], base: str) -> JsonPatch:
        for index, entry in enumerate(container.get("env") or []):
            if entry.get("name") == "PYTHONPATH":
                value = entry.get("value")
                if value is None or value.split(":")[0] == names.RUNTIME_MOUNT:
                    return []  # from a valueFrom (left alone) or already staged
                return [
                    {
                        "op": "replace",
                        "path": base + pointer("env", index, "value"),
                        "value": f"{names.RUNTIME_MOUNT}:{value}" if value else names.RUNTIME_MOUNT,
                    }
                ]
        return []  # absent: added with the other variables

    def _worker(self, pod: Mapping[str, Any], ctx: AdmissionContext,
                claims: list[str] | None = None) -> JsonPatch:
        spec = pod_fields.pod_spec(pod)
        ops: JsonPatch = []
        entries = spec.get("resourceClaims") or []
        for index in reversed(range(len(entries))):
            if entries[index].get("name") in (claims or ()):
                ops.append({"op": "remove", "path": pointer("spec", "resourceClaims", index)})
        ops += add_to_list(spec, "/spec", "schedulingGates", {"name": self.gate})
        if not spec.get("priorityClassName"):
            ops += self._priority(ctx)
        env = [
            {"name": names.ENV_ROLE, "value": names.ROLE_WORKER},
            annotation_env(names.ENV_SCOUT_JOB_ID, names.SCOUT_JOB_ID_ANNOTATION),
            annotation_env(names.ENV_SCOUT_SESSION, names.SCOUT_SESSION_ANNOTATION),
            annotation_env(names.ENV_SCOUT_STATUS, names.SCOUT_STATUS_ANNOTATION),
        ]
        # The backend is the scout's: stamped on the worker at release, read at container start.
        backend = backend_env(ctx.resource_config.attribute_keys, claimed=bool(claims))
        for index, container in enumerate(spec.get("containers") or []):
            base = pointer("spec", "containers", index)
            asked = pod_fields.virtual_requests(container)
            used = self._drop_claims(container, base, claims or [])
            ops += used
            ops += add_env(container, base, env + backend if asked or used else env)
            for resource, section in sorted(asked.items()):
                ops.append({"op": "remove", "path": base + pointer("resources", section, resource)})
                other = "limits" if section == "requests" else "requests"
                if resource in ((container.get("resources") or {}).get(other) or {}):
                    ops.append(
                        {"op": "remove", "path": base + pointer("resources", other, resource)}
                    )
        return ops

    @staticmethod
    def _drop_claims(container: Mapping[str, Any], base: str, claims: list[str]) -> JsonPatch:
        """Ops removing the container's uses of ``claims`` (the scout's to hold)."""
        uses = (container.get("resources") or {}).get("claims") or []
        return [{"op": "remove", "path": base + pointer("resources", "claims", index)}
                for index in reversed(range(len(uses))) if uses[index].get("name") in claims]

    def _priority(self, ctx: AdmissionContext) -> JsonPatch:
        """Name the class and its value: the Priority admission plugin ran before webhooks."""
        cluster = ctx.cluster
        found = (
            None
            if cluster is None
            else ctx.cached(
                "priority-class",
                lambda: cluster.get(PRIORITY_CLASSES, names.QUANTUM_PRIORITY_CLASS),
            )
        )
        if found is None:
            ctx.warn(
                f"PriorityClass {names.QUANTUM_PRIORITY_CLASS} does not exist; "
                "workers keep their priority (apply deploy/webhook.yaml)"
            )
            return []
        ops: JsonPatch = [
            {"op": "add", "path": "/spec/priorityClassName", "value": names.QUANTUM_PRIORITY_CLASS},
            {"op": "add", "path": "/spec/priority", "value": int(found.get("value", 0))},
        ]
        if found.get("preemptionPolicy"):
            ops.append(
                {"op": "add", "path": "/spec/preemptionPolicy", "value": found["preemptionPolicy"]}
            )
        return ops


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    return [QuantumSplitHandler(settings)]


@hookimpl
def fluence_webhook_routes(settings: Settings, cluster: ClusterAPI) -> list[Any]:
    """The scouts' reports (:mod:`~fluence_core.hybrid.endpoint`): what ungates the workers."""
    return [ReportEndpoint(cluster, settings)]


@hookimpl
def fluence_webhook_loops(settings: Settings, cluster: ClusterAPI) -> list[Any]:
    """The orphan sweep (:mod:`~fluence_core.hybrid.orphans`): workers whose scout is gone."""
    return [OrphanSweep(cluster, settings)]
