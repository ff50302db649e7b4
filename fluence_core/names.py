"""Every name Fluence shares with Kubernetes, pods and users, in one place.

Labels, annotations, extended resources, environment variables and gates are a
contract between the scheduler, the webhook, the sidecar and user workloads.
Keeping them here means a rename is one edit, and no two modules can drift.
"""

from __future__ import annotations

import re
from typing import Final

SCHEDULER_NAME: Final = "fluence"
"""Pods opt in with ``spec.schedulerName: fluence``."""

DOMAIN: Final = "fluence.flux-framework.org"
RESOURCE_DOMAIN: Final = "fluxion.flux-framework.org"

GROUP_LABEL: Final = f"{DOMAIN}/group"
"""Label naming the gang a pod belongs to."""

GROUP_SIZE_ANNOTATION: Final = f"{DOMAIN}/group-size"
COORDINATION_ANNOTATION: Final = f"{DOMAIN}/coordination"
REQUIRE_ANNOTATION_PREFIX: Final = f"{DOMAIN}/require-"
BACKEND_ANNOTATION: Final = f"{DOMAIN}/backend"
ATTR_ANNOTATION_PREFIX: Final = f"{DOMAIN}/attr-"
JOBIDS_ANNOTATION: Final = f"{DOMAIN}/jobids"
ALLOCATION_ANNOTATION: Final = f"{DOMAIN}/allocation"
SCOUT_JOB_ID_ANNOTATION: Final = f"{DOMAIN}/scout-job-id"
SCOUT_SESSION_ANNOTATION: Final = f"{DOMAIN}/scout-session"
PROTECTED_ANNOTATION: Final = f"{DOMAIN}/protected"
RESERVATION_ANNOTATION: Final = f"{DOMAIN}/reservation"
"""On a waiting group's record owner: the room the scheduler holds for it and from when
(JSON, :mod:`fluence_core.scheduler.reservations`); shown by ``fluence status``."""
MANAGED_BY_LABEL: Final = f"{DOMAIN}/managed-by"

# The in-container runtime (interceptor, sidecar, backend selection).
SCOUT_STATUS_ANNOTATION: Final = f"{DOMAIN}/scout-status"
"""What the sidecar tells each worker at ungate: one of the SCOUT_STATUS_* values."""
SCOUT_STATUS_READY: Final = "ready"
SCOUT_STATUS_NO_RESULT: Final = "no-result"
SCOUT_STATUS_NOT_FOUND: Final = "not-found"
SCOUT_STATUS_OBSERVED: Final = "observed"
"""Observe-only mode: the sidecar recorded the queue and released nobody (final report only)."""
SCOUT_STATUS_LOST: Final = "scout-lost"
"""Set by the webhook's orphan sweep, not the sidecar: the scout pod ended or went away
before it reported a release, so its workers are let go without the scout's task."""
SCOUT_QUEUE_POSITION_ANNOTATION: Final = f"{DOMAIN}/scout-queue-position"
"""On the scout: its task's queue position when the sidecar found it."""
SCOUT_ANNOTATION_PREFIX: Final = f"{DOMAIN}/scout-"
"""Every scout-* annotation: written by Fluence at a scout's report or sweep, never by users."""


# The scout's reports to Fluence (docs/scout-report.md).
REPORT_PATH: Final = "/v1/scout-report"
"""Served by the webhook's HTTPS server; the sidecar POSTs its reports here."""
REPORT_FOUND: Final = "found"
REPORT_RELEASE: Final = "release"
REPORT_FINAL: Final = "final"
REPORT_TOKEN_VOLUME: Final = "fluence-report-token"
"""Projected ServiceAccount token volume (Fluence's audience) the webhook adds to the scout."""
REPORT_TOKEN_MOUNT: Final = "/var/run/secrets/fluence.flux-framework.org/report"
REPORT_TOKEN_FILE: Final = "token"
ENV_REPORT_TOKEN_FILE: Final = "FLUENCE_REPORT_TOKEN_FILE"
TOKEN_POD_NAME_EXTRA: Final = "authentication.kubernetes.io/pod-name"
"""TokenReview ``user.extra`` key of a token bound to a pod: the pod's name."""
TOKEN_POD_UID_EXTRA: Final = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT_USER_PREFIX: Final = "system:serviceaccount:"
REQUIRE_BACKEND_ANNOTATION: Final = f"{REQUIRE_ANNOTATION_PREFIX}backend"
"""Written by ``fluence select``: pin the virtual resource to one backend."""
SELECTION_ANNOTATION: Final = f"{DOMAIN}/selection"
"""Written by ``fluence select``: a JSON record of the policy, the candidates and why."""
TASK_TAG_KEY: Final = "fluence-pod-uid"
"""Tag the interceptor puts on every vendor task (value: the pod's uid)."""
ENV_POD_UID: Final = "FLUENCE_POD_UID"
ENV_RUNTIME_DIR: Final = "FLUENCE_RUNTIME_DIR"
"""Directory shared by the scout's app and its sidecar (job records, release marker)."""
ENV_SESSION_HOLD_TIMEOUT: Final = "FLUENCE_SESSION_HOLD_TIMEOUT"
JOB_RECORD_FILE: Final = "jobs.jsonl"
"""In the runtime dir: one JSON line per task the interceptor saw (where tags do not exist)."""
RELEASE_MARKER_FILE: Final = "release"
"""In the runtime dir: written by the sidecar when the workers are done; the scout's
session close waits for it."""
STAGED_PACKAGE: Final = "fluence_staged"
"""The package ``fluence stage`` writes next to ``sitecustomize.py``."""

# Backend figures for ``fluence select`` / ``kubectl fluence select`` (runtime/figures.py).
FLUENCE_NAMESPACE: Final = "fluence-system"
"""The namespace Fluence runs in (deploy/namespace.yaml), where it keeps its ConfigMaps."""
BACKENDS_CONFIGMAP: Final = "fluence-backends"
"""The ConfigMap of backend prices, queue depths and status the scheduler refreshes."""
BACKENDS_CONFIGMAP_KEY: Final = "backends.yaml"
"""Its one data key: a YAML mapping of backend name to figures (the ``--prices`` schema)."""
RESOURCES_CONFIGMAP: Final = "fluence-resources"
"""The ConfigMap holding the scheduler's resources.yaml (deploy/fluence-resources.yaml)."""
RESOURCES_CONFIGMAP_KEY: Final = "resources.yaml"
REFRESHED_AT_ANNOTATION: Final = f"{DOMAIN}/refreshed-at"
"""On that ConfigMap: when the scheduler last asked the providers (RFC 3339, UTC)."""
KUBECTL_PLUGIN: Final = "kubectl-fluence"
"""The console script kubectl finds on PATH for ``kubectl fluence ...``."""

COORDINATION_INDEPENDENT: Final = "independent"
COORDINATION_SHARED: Final = "shared"

QUANTUM_GATE: Final = "quantum.braket/ready"
QUANTUM_PRIORITY_CLASS: Final = "fluence-quantum-classical"
SCOUT_GROUP_SUFFIX: Final = "-scout"

ENV_BACKEND: Final = "FLUXION_BACKEND"
ENV_ATTR_PREFIX: Final = "FLUXION_"

# The admission webhook and the shared-coordination split (scout + workers).
ROLE_LABEL: Final = f"{DOMAIN}/role"
"""Set by the quantum split: ``scout`` or ``worker``."""
ROLE_SCOUT: Final = "scout"
ROLE_WORKER: Final = "worker"
PROMISED_CORES_ANNOTATION: Final = f"{DOMAIN}/promised-cores"
"""Cores admission control promised the pod's whole group (the durable record)."""
SPLIT_SEAL_ANNOTATION: Final = f"{DOMAIN}/split-seal"
"""On the scout and each worker the quantum split made: a keyed digest only the webhook that
split the pod can produce (:mod:`fluence_core.webhook.admission.owned`). It makes the pod a
member of a hybrid group: what the quantum PriorityClass and the protected mark require
(deploy/quantum-priority-policy.yaml)."""
JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
"""Label and annotation the Job controller puts on an Indexed Job's pods."""
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
"""The Job controller's label on every pod of a Job: the Job's name."""
JOB_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
"""The Job controller's label on every pod of a Job: the Job's uid."""
ENV_ROLE: Final = "FLUENCE_ROLE"
ENV_GROUP: Final = "FLUENCE_GROUP"
ENV_GROUP_SIZE: Final = "FLUENCE_GROUP_SIZE"
ENV_SCOUT_JOB_ID: Final = "FLUENCE_SCOUT_JOB_ID"
ENV_SCOUT_SESSION: Final = "FLUENCE_SCOUT_SESSION"
ENV_SCOUT_STATUS: Final = "FLUENCE_SCOUT_STATUS"
"""Workers: the scout-status annotation at ungate (``ready``, ``no-result``, ``not-found``;
``scout-lost`` from the webhook's orphan sweep)."""
ENV_POD_NAME: Final = "FLUENCE_POD_NAME"
ENV_POD_NAMESPACE: Final = "FLUENCE_POD_NAMESPACE"
RUNTIME_VOLUME: Final = "fluence-runtime"
IMAGE: Final = "ghcr.io/flux-framework/fluence:0.1.0"
"""The Fluence image (Containerfile): the scheduler, webhook and device plugin run it, and
the webhook's stage init container and sidecar use it (FLUENCE_RUNTIME_IMAGE's default).
Its tag is fluence-core's version."""

# Who may write what: fluence_core/webhook/admission/owned.py,
# deploy/admission-policy.yaml.
SCHEDULER_ONLY_ANNOTATIONS: Final = (ALLOCATION_ANNOTATION, JOBIDS_ANNOTATION,
                                     BACKEND_ANNOTATION)
"""Written by Fluence after admission only (with :data:`SCHEDULER_ONLY_PREFIXES`): the webhook
strips them from every Fluence pod it admits, and the admission policy refuses a CREATE
that carries one from anyone but Fluence."""
SCHEDULER_ONLY_PREFIXES: Final = (ATTR_ANNOTATION_PREFIX, SCOUT_ANNOTATION_PREFIX)
OWNED_ANNOTATIONS: Final = (*SCHEDULER_ONLY_ANNOTATIONS, PROTECTED_ANNOTATION,
                            PROMISED_CORES_ANNOTATION, SPLIT_SEAL_ANNOTATION)
"""With :data:`SCHEDULER_ONLY_PREFIXES` and the role label: what only Fluence may set or
change once an object exists (the admission policy refuses anyone else's UPDATE of it)."""
FLUENCE_USERS: Final = ("system:serviceaccount:fluence-system:fluence",
                        "system:serviceaccount:fluence-system:fluence-webhook")
"""The ServiceAccounts of deploy/ that write Fluence's own annotations (scheduler, webhook)."""

RUNTIME_MOUNT: Final = "/fluence-runtime"
"""emptyDir the stage init container fills with the interceptor (sitecustomize)."""
STAGE_CONTAINER: Final = "fluence-stage"
SIDECAR_CONTAINER: Final = "fluence-sidecar"
SIDECAR_CREDENTIALS_ANNOTATION: Final = f"{DOMAIN}/sidecar-credentials"
"""On a shared-coordination pod: what the sidecar gets of the app container's ``env`` and
``envFrom`` (references only, never values). Absent: all of it; ``none``: nothing; else a
comma-separated list of Secrets (``aws-creds``) and Secret keys (``ibm-quantum/token``)."""
SIDECAR_CREDENTIALS_NONE: Final = "none"
DEFAULT_CONTAINER_ANNOTATION: Final = "kubectl.kubernetes.io/default-container"
"""kubectl's choice of a pod's main container; the sidecar copies its credentials."""
KUBE_SYSTEM: Final = "kube-system"

SETTINGS_ENV_PREFIX: Final = "FLUENCE_"

GPU_RESOURCE: Final = "nvidia.com/gpu"

# Graph vocabulary: the vertex types and property keys Fluxion sees.
VIRTUAL_TRUE: Final = "virtual=true"
VIRTUAL_FALSE: Final = "virtual=false"
DEVICE_PROPERTY_PREFIX: Final = "dra."
"""Prefix of a DRA device vertex's key-only properties (:func:`device_property`)."""
CLASS_PROPERTY_PREFIX: Final = "class="
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
RACK_LABEL: Final = "topology.kubernetes.io/rack"
REGION_LABEL: Final = "topology.kubernetes.io/region"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
"""The node itself: never a topology level (the graph's node vertices are that level)."""
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""The label the API server keeps on every namespace: its own name (what a namespace
selector matches when Fluence knows no other label of the namespace)."""
UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"
"""The taint ``spec.unschedulable`` (a cordon) stands for, with effect ``NoSchedule``."""

# Storage: what kube-scheduler's VolumeBinding reads and writes on claims.
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
"""A StorageClass provisioner that makes nothing: its volumes exist already."""
STORAGE_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"
"""A claim's storage class in the beta annotation, read where ``storageClassName`` is unset."""
SELECTED_NODE_ANNOTATION: Final = "volume.kubernetes.io/selected-node"
"""On a claim waiting for its first consumer: the node chosen, so the provisioner acts."""
PODGROUP_FINALIZER: Final = "scheduling.k8s.io/podgroup-protection"
"""Added by the API server to every PodGroup."""

# Topology (fluence_core/topology.py): levels are node labels, widest first.
TOPOLOGY_UNKNOWN_DOMAIN: Final = "_unknown"
"""The domain, at each level, of the nodes that lack that level's label. A label value must
begin with a letter or digit, so no real domain can take this name."""
TOPOLOGY_REQUIRED_ANNOTATION: Final = f"{DOMAIN}/topology-required"
"""On a group's pods: a level (its node label or its type, ``rack``) the whole group must
stay inside one domain of."""
TOPOLOGY_PREFERRED_ANNOTATION: Final = f"{DOMAIN}/topology-preferred"
"""On a group's pods: the level tried first; the group falls back level by level upward
(to the required level if one is stated, else to anywhere)."""
SINGLE_NUMA_ANNOTATION: Final = f"{DOMAIN}/single-numa"
"""``"true"`` on a pod (or every pod of a group): its whole cores, GPUs and memory come from
one NUMA zone of its node; only nodes publishing a NodeResourceTopology can promise it."""
NRT_GROUP: Final = "topology.node.k8s.io"
"""The NodeResourceTopology API group (the NFD topology-updater publishes one per node)."""
KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
"""``"true"``: no domain is sought, not even the default smallest one."""
KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-required-topology"
"""A level (or node label) each slice of the group must stay inside one domain of; with
:data:`KUEUE_SLICE_SIZE_ANNOTATION`."""
KUEUE_SLICE_SIZE_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-size"
"""How many pods make one slice; the group's size must be a multiple of it."""
KUEUE_SLICE_CONSTRAINTS_ANNOTATION: Final = (
    "kueue.x-k8s.io/podset-slice-required-topology-constraints")
"""Slices in up to three layers, widest first, as JSON: ``[{"topology": <label>, "size":
<pods>}, ...]``; each layer's size divides the one before it."""
KUEUE_PODSET_GROUP_ANNOTATION: Final = "kueue.x-k8s.io/podset-group-name"
"""On the pods (or PodGroup, Job, JobSet) of several gangs of one workload: the gangs that
name the same group share one domain of their required level, matched together."""
PODSET_GROUP_WORKLOAD_ANNOTATION: Final = f"{DOMAIN}/podset-group-workload"
"""On a PodGroup the webhook's controller made for a Job of a JobSet: ``JobSet/<name>``, the
workload whose gangs a :data:`KUEUE_PODSET_GROUP_ANNOTATION` names together."""

# A Flux cluster inside an Indexed Job or JobSet (plugin fluence-flux).
FLUX_ANNOTATION: Final = f"{DOMAIN}/flux"
FLUX_LABEL: Final = f"{DOMAIN}/flux"
"""On a Job or JobSet the flux handler rewrote: the webhook's controller makes its ConfigMap,
Secret and Service from the stored object it selects by this label."""
"""``"true"`` on a Job or JobSet: run a Flux instance across its pods, the command under it."""
FLUX_TASKS_PER_NODE_ANNOTATION: Final = f"{DOMAIN}/flux-num-proc-per-node"
"""Tasks per pod for ``flux submit --tasks-per-node`` (default 1)."""
FLUX_QUEUE_POLICY_ANNOTATION: Final = f"{DOMAIN}/flux-queue-policy"
"""Fluxion's queue policy inside the instance (default ``fcfs``)."""
FLUX_NETWORK_DEVICE_ANNOTATION: Final = f"{DOMAIN}/flux-network-device"
"""Interface the brokers bind (default ``eth0``)."""
FLUX_CONTAINER_ANNOTATION: Final = f"{DOMAIN}/flux-container"
"""Which container runs the broker and the user's command (default: the first)."""
TRAINER_FRAMEWORK_LABEL: Final = "trainer.kubeflow.org/framework"
"""Kubeflow Trainer's runtime label; ``flux`` opts the runtime's JobSets in."""
TRAINER_FRAMEWORK_FLUX: Final = "flux"

CLAIM_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
"""Kubernetes' finalizer on a ResourceClaim a scheduler allocated: written before the
allocation, it lets the resourceclaim controller clear the allocation once the claim is
reserved for no one, and keeps the claim while it is allocated."""

# The QPU DRA driver (plugin fluence-dra-qpu): resources.yaml backends as DRA devices.
QPU_DRA_DRIVER: Final = f"qpu.{RESOURCE_DOMAIN}"
"""The driver of the ResourceSlices that publish the backends as network-attached devices;
also the name of the DeviceClass of its ``qpu`` devices, so a claim reads like a GPU's."""
QPU_DEVICE_CLASS: Final = QPU_DRA_DRIVER
QPU_BACKENDS_CLASS: Final = f"backends.{RESOURCE_DOMAIN}"
"""The DeviceClass of every device of the QPU driver (a claim names the ``type`` itself)."""
QPU_CLASSES: Final = (QPU_DEVICE_CLASS, QPU_BACKENDS_CLASS)
"""The DeviceClasses (deploy/qpu-driver.yaml) whose claims ask for a quantum backend."""
QPU_DRIVER_MANAGER: Final = "fluence-dra-qpu"
"""The ``managed-by`` label value on the driver's slices: the slices it may replace."""
QPU_CDI_KIND: Final = f"{RESOURCE_DOMAIN}/qpu"
"""The CDI kind (``vendor/class``) of the specs the QPU kubelet plugin writes; a container's
device is ``<kind>=<name>``."""
QPU_DEVICES_DIGEST_ANNOTATION: Final = f"{DOMAIN}/devices-digest"
"""On each of the driver's slices: a digest of its whole pool as published, so a restarted
driver republishes (a new generation) only a pool whose devices changed."""

ENTRY_POINT_GROUP: Final = "fluence"
LOGGER_NAME: Final = "fluence"
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""What :data:`ENV_LOG_LEVEL` may say (any case)."""
ENV_LOG_LEVEL: Final = f"{SETTINGS_ENV_PREFIX}LOG_LEVEL"
"""The variable of ``Settings.log_level``, read by the logger before any Settings exist (the
staged ``boot`` module, standard library only, spells it out and is tested to agree)."""

_ENV_UNSAFE = re.compile(r"[^A-Za-z0-9]")


def extended_resource(resource_type: str) -> str:
    """The extended resource a pod requests to get a virtual ``resource_type``."""
    return f"{RESOURCE_DOMAIN}/{resource_type}"


def virtual_type_of(resource_name: str) -> str | None:
    """The virtual type behind an extended resource name, or None if it is not ours."""
    prefix = f"{RESOURCE_DOMAIN}/"
    if resource_name.startswith(prefix) and len(resource_name) > len(prefix):
        return resource_name[len(prefix):]
    return None


def class_property(resource_type: str) -> str:
    """The key-only property marking a virtual vertex as able to serve ``resource_type``."""
    return f"{CLASS_PROPERTY_PREFIX}{resource_type}"


def attribute_property(key: str, value: str) -> str:
    """The key-only property a virtual vertex carries for one of its attributes."""
    return f"{RESOURCE_DOMAIN}/{key}={value}"


def device_property(key: str, value: str) -> str:
    """The key-only property a DRA device vertex carries for its driver, its pool and each
    of its attributes (``key`` qualified by its domain)."""
    return f"{DEVICE_PROPERTY_PREFIX}{key}={value}"


def attr_annotation(key: str) -> str:
    """The annotation where the scheduler writes a chosen attribute for the pod's env."""
    return f"{ATTR_ANNOTATION_PREFIX}{key}"


def env_name_for_attribute(key: str) -> str:
    """``FLUXION_<KEY>``: upper-cased, every non-alphanumeric replaced by ``_``."""
    return ENV_ATTR_PREFIX + _ENV_UNSAFE.sub("_", key).upper()
