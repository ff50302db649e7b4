"""Fluence's public API for plugin authors: everything a plugin may import, in one module.

Plugins, ours under ``plugins/`` as much as a third party's, import from here and
nowhere else in ``fluence_core`` (a test holds our own plugins to it). The
modules behind these names are implementation details and may move; the names
exported here stay. Test helpers and pytest fixtures live in
:mod:`fluence_core.testing` (a pytest plugin loaded through ``pytest11``).

What is here, by the hook that needs it:

* every plugin: :data:`hookimpl`, :data:`names` (every label, annotation and
  env name), :data:`logger`, :class:`FluenceError`, the settings base class
  :class:`PluginSettings` and Fluence's own :class:`Settings`;
* ``fluence_matcher``: :class:`Matcher` (and :class:`GroupMatcher`, with
  :class:`GroupRefusal`, for a matcher that holds a group's jobspecs
  together), :class:`Allocation` and its shares,
  :class:`ResourceGraph`, :class:`NodeInfo`, :class:`MatchPolicy`, and for NUMA zones
  :class:`ZoneLoad` and :data:`NUMA_TYPE`;
* scheduler hooks: :class:`Group`, :class:`PodRequest`, :class:`PodPlacement`
  and the :data:`SchedulingContext` they receive; a pod's size by kube-scheduler's
  rule is :func:`pod_requests` (never recount a pod's containers);
* ``fluence_feasibility_filters``: :class:`FeasibilityFilter` (asked once per
  pod, with its :class:`PodFacts` and a :class:`Snapshot`, for a :class:`NodeCheck`
  over :class:`NodeFacts`, a :class:`Refusal`, or nothing);
* ``fluence_score_plugins``: :class:`ScorePlugin` (asked about a pod's feasible
  nodes for :data:`NodeScores`, 0 to :data:`MAX_NODE_SCORE`, or nothing), with
  kube-scheduler's :func:`default_normalize`;
* ``fluence_settings``: :class:`PluginSettings` subclasses (and :class:`Switch`);
* ``fluence_webhook_handlers`` and ``fluence_admit``: :class:`Handler`, :class:`Reconciler`
  and :class:`StoredContext` (a handler that makes objects makes them from the stored
  object, never at admission),
  :class:`AdmissionContext`, :class:`AdmissionDenied`, the JSON patch helpers
  (:data:`JsonPatch`, :func:`pointer`, :func:`apply_patch`,
  :func:`add_all_to_list`), pod accessors,
  the :class:`ServiceState` a service keeps across requests, and the CEL pieces of
  :mod:`conditions` with :func:`judges`, to say which pods a handler or an admission
  check needs (the API server sends no other);
* ``fluence_providers``: :class:`Provider`, :class:`Backend`,
  :class:`BackendInfo`, :func:`parse_queue_position`, and :func:`job_records` for
  what an interceptor recorded;
* talking to Kubernetes: :class:`ClusterAPI`, :class:`Resource`, the resource
  names and the API errors;
* reading any object's metadata (absent parts read as empty): :func:`metadata_of`,
  :func:`labels_of`, :func:`annotations_of`, :func:`owner_references_of` and
  :func:`controller_reference`; never spell ``obj.get("metadata") or {}`` out.
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
from fluence_core.webhook import conditions
from fluence_core.kube.patch import JsonPatch, apply_patch, pointer
from fluence_core.webhook.base import AdmissionContext, AdmissionDenied, Handler, ServiceState
from fluence_core.webhook.controller import Reconciler, StoredContext
from fluence_core.webhook.conditions import judges
from fluence_core.webhook.env import add_all_to_list
from fluence_core.webhook.pods import (
    group_of,
    group_size,
    is_fluence_pod,
    is_quantum,
    positive_int_annotation,
    spec,
)

KubeDict = KubeObject
""":data:`KubeObject` under the name this API gave it first, kept for plugins that use it."""
metadata = metadata_of
""":func:`metadata_of` under the name this API gave it first, kept for plugins that use it."""
labels = labels_of
""":func:`labels_of` under the name this API gave it first, kept for plugins that use it."""

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
    "KubeDict",
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
    "is_quantum",
    "job_records",
    "judges",
    "labels",
    "labels_of",
    "load_resource_config",
    "load_settings",
    "logger",
    "metadata",
    "metadata_of",
    "names",
    "owner_references_of",
    "parse_queue_position",
    "pod_requests",
    "pointer",
    "positive_int_annotation",
    "spec",
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
