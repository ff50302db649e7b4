"""Fluence's public API for plugin authors: everything a plugin may import, in one module.

Plugins, ours under ``plugins/`` as much as a third party's, import from here and
nowhere else in ``fluence_core`` (a test holds our own plugins to it). The
modules behind these names are implementation details and may move; the names
exported here stay. Test helpers and pytest fixtures live in
:mod:`fluence_core.testing` (a pytest plugin loaded through ``pytest11``).
docs/plugins.md lists what is here by the hook that needs it.
"""

from __future__ import annotations

from fluence_core import hookimpl, names
from fluence_core.kube.api import (
    CONFIGMAPS,
    JOBS,
    JOBSETS,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    SECRETS,
    SERVICES,
    TRAINJOBS,
    ClusterAPI,
    KubeObject,
    Resource,
)
from fluence_core.errors import FluenceError, MatcherError, SettingsError
from fluence_core.feasibility import (
    FeasibilityFilter,
    NodeCheck,
    NodeFacts,
    PodFacts,
    Refusal,
    Snapshot,
)
from fluence_core.feasibility.scoring import (
    MAX_NODE_SCORE,
    NodeScores,
    ScorePlugin,
    default_normalize,
)
from fluence_core.graph import NUMA_TYPE, ResourceGraph
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.kube.errors import ApiError, Conflict, NotFound
from fluence_core.kube.meta import (
    annotations_of,
    controller_reference,
    labels_of,
    metadata_of,
    owner_references_of,
)
from fluence_core.log import configure as configure_logging
from fluence_core.log import logger
from fluence_core.matcher.base import (
    Allocation,
    GroupMatcher,
    GroupRefusal,
    Matcher,
    MatchOutcome,
    NodeShare,
    ReservationPlanner,
    VirtualShare,
)
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.numa import ZoneLoad
from fluence_core.matcher.readback import PodPlacement
from fluence_core.pod_requests import pod_requests
from fluence_core.resource_config import ResourceConfig, load_resource_config
from fluence_core.topology import Constraint as TopologyConstraint
from fluence_core.topology import RESERVED_TYPES, Level
from fluence_core.runtime.provider import (
    BEYOND_REPORTED,
    Backend,
    BackendInfo,
    Provider,
    job_records,
    parse_queue_position,
)
from fluence_core.settings import MatchPolicy, PluginSettings, Settings, Switch, load_settings
from fluence_core.webhook import cel as conditions
from fluence_core.kube.patch import JsonPatch, apply_patch, pointer
from fluence_core.webhook.admission.base import (
    AdmissionContext,
    AdmissionDenied,
    Handler,
    ServiceState,
)
from fluence_core.webhook.controller.controller import Reconciler, StoredContext
from fluence_core.webhook.cel import judges
from fluence_core.webhook.admission.env import add_all_to_list
from fluence_core.webhook.controller.pod_groups import positive_int_annotation
from fluence_core.webhook.admission.gangs import group_size
from fluence_core.webhook.pod_fields import group_of, is_fluence_pod, is_quantum_pod, pod_spec

__all__ = [
    "BEYOND_REPORTED",
    "CONFIGMAPS",
    "JOBS",
    "JOBSETS",
    "MAX_NODE_SCORE",
    "NUMA_TYPE",
    "NODES",
    "PODS",
    "PRIORITY_CLASSES",
    "RESOURCE_CLAIMS",
    "RESOURCE_SLICES",
    "RESERVED_TYPES",
    "SECRETS",
    "SERVICES",
    "TRAINJOBS",
    "AdmissionContext",
    "Reconciler",
    "StoredContext",
    "AdmissionDenied",
    "Allocation",
    "ApiError",
    "Backend",
    "BackendInfo",
    "ClusterAPI",
    "Conflict",
    "FeasibilityFilter",
    "FluenceError",
    "Group",
    "GroupMatcher",
    "GroupRefusal",
    "Handler",
    "JsonPatch",
    "KubeObject",
    "Level",
    "MatchOutcome",
    "MatchPolicy",
    "Matcher",
    "MatcherError",
    "NodeCheck",
    "NodeFacts",
    "NodeInfo",
    "NodeScores",
    "NodeShare",
    "NotFound",
    "PodPlacement",
    "PluginSettings",
    "PodFacts",
    "PodRequest",
    "Provider",
    "Refusal",
    "ReservationPlanner",
    "Resource",
    "ResourceConfig",
    "ResourceGraph",
    "SchedulingContext",
    "ScorePlugin",
    "ServiceState",
    "Settings",
    "SettingsError",
    "Snapshot",
    "Switch",
    "TopologyConstraint",
    "VirtualShare",
    "ZoneLoad",
    "add_all_to_list",
    "conditions",
    "annotations_of",
    "apply_patch",
    "configure_logging",
    "connect_cluster",
    "controller_reference",
    "default_normalize",
    "group_of",
    "group_size",
    "hookimpl",
    "is_fluence_pod",
    "is_quantum_pod",
    "job_records",
    "judges",
    "labels_of",
    "load_resource_config",
    "load_settings",
    "logger",
    "metadata_of",
    "names",
    "owner_references_of",
    "parse_queue_position",
    "pod_requests",
    "pod_spec",
    "pointer",
    "positive_int_annotation",
]


def connect_cluster() -> ClusterAPI:
    """The API server in cluster (a mounted service account) or of the kubeconfig's current
    context, for a plugin's own command; none reachable raises :class:`FluenceError` saying
    why, so the command exits with that sentence rather than a traceback."""
    from fluence_core.kube.client import KubeCluster

    try:
        return KubeCluster.connect()
    except FluenceError:
        raise
    except Exception as error:  # no kubeconfig, no in-cluster token: say so plainly
        raise FluenceError(f"cannot reach a Kubernetes API server: {error}") from None
