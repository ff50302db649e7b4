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
MANAGED_BY_LABEL: Final = f"{DOMAIN}/managed-by"

COORDINATION_INDEPENDENT: Final = "independent"
COORDINATION_SHARED: Final = "shared"

QUANTUM_GATE: Final = "quantum.braket/ready"
QUANTUM_PRIORITY_CLASS: Final = "fluence-quantum-classical"
SCOUT_GROUP_SUFFIX: Final = "-scout"

ENV_BACKEND: Final = "FLUXION_BACKEND"
ENV_ATTR_PREFIX: Final = "FLUXION_"

SETTINGS_ENV_PREFIX: Final = "FLUENCE_"

GPU_RESOURCE: Final = "nvidia.com/gpu"

# Graph vocabulary: the vertex types and property keys Fluxion sees.
VIRTUAL_TRUE: Final = "virtual=true"
VIRTUAL_FALSE: Final = "virtual=false"
CLASS_PROPERTY_PREFIX: Final = "class="
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
RACK_LABEL: Final = "topology.kubernetes.io/rack"

ENTRY_POINT_GROUP: Final = "fluence"
LOGGER_NAME: Final = "fluence"

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


def attr_annotation(key: str) -> str:
    """The annotation where the scheduler writes a chosen attribute for the pod's env."""
    return f"{ATTR_ANNOTATION_PREFIX}{key}"


def env_name_for_attribute(key: str) -> str:
    """``FLUXION_<KEY>``: upper-cased, every non-alphanumeric replaced by ``_``."""
    return ENV_ATTR_PREFIX + _ENV_UNSAFE.sub("_", key).upper()
