"""A pytest plugin for Fluence plugin authors (entry point ``pytest11``).

Fixtures build the small things every provider or matcher test needs, with the
same code the scheduler uses. Beside :mod:`fluence_core.api`, this is the one
module a plugin's *tests* import: it re-exports the harnesses they drive (the
in-memory cluster, the admission service, a real API server, the sidecar).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import pytest

from fluence_core import names
from fluence_core.kube.api import (
    DEVICE_CLASSES, NAMESPACES, NODES, PODGROUPS, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES,
    Resource,
)
from fluence_core.kube.fake import FakeCluster
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import compute_jobspec, virtual_jobspec
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.resource_config import ResourceConfig, parse_resource_config
from fluence_core.runtime.conformance import CASES, Case, TaskState, VendorDouble, run_case
from fluence_core.runtime.fake_provider import FakeQueueProvider, FakeTask
from fluence_core.hybrid.sidecar import Outcome as SidecarOutcome
from fluence_core.hybrid.sidecar import Sidecar, SidecarConfig, VirtualClock
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import Settings, load_settings
from fluence_core.testing_apiserver import find_assets, start_apiserver, wait_for
from fluence_core.webhook import build_service
from fluence_core.webhook.transport import tls
from fluence_core.webhook.controller.informer import watched_for
from fluence_core.webhook.admission.review import AdmissionEndpoint, AdmissionService
from fluence_core.webhook.transport.server import WebhookServer, server_context
from fluence_core.webhook.controller.writer import BackgroundWriter

__all__ = [
    "AdmissionEndpoint", "AdmissionService", "BRAKET_EXAMPLE", "BackgroundWriter",
    "EmbeddedMatcher", "FakeCluster", "FakeQueueProvider", "FakeTask", "FluencePluginManager",
    "ManualClock", "SchedulerHarness", "Sidecar", "SidecarConfig",
    "SidecarOutcome", "TaskState", "VendorDouble", "VirtualClock", "WebhookServer",
    "braket_config", "build_service", "claim_entries", "compute_jobspec", "fake_cluster",
    "fake_vendor_queue", "find_assets", "get_plugin_manager", "indexed_job_pods", "job_owner",
    "make_node_dict", "make_device", "make_device_class_dict", "make_device_request", "make_nodes",
    "make_pod_dict", "make_pod_group_dict", "make_resource_claim_dict",
    "make_resource_slice_dict", "make_split_pod", "parse_resource_config",
    "pod_group", "provider_conformance", "scheduler_harness", "server_context", "small_graph",
    "start_apiserver", "tls",
    "vendor_clock", "virtual_jobspec", "wait_for", "watched_for",
]

class ManualClock:
    """A monotonic clock a test moves by hand (``clock.now += 1.5``): backoffs, quiet
    periods and Lease expiries are then checked without sleeping."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


BRAKET_EXAMPLE = """
attributes:
  aws-east: {provider: braket, region: us-east-1}
resources:
  - type: qdevice
    name: rigetti_cepheus
    attributes: aws-east
    with:
      - type: qpu
        with:
          - type: qubit
            count: 80
"""


def make_nodes(count: int, cores: int = 8, memory_mib: int = 8192, gpus: int = 0) -> list[NodeInfo]:
    """``count`` identical nodes named node0, node1, ..."""
    return [NodeInfo(f"node{i}", cores, memory_mib, gpus) for i in range(count)]


def make_node_dict(
    name: str, cpu: str | int = "8", memory: str = "8Gi", *, gpus: int | None = None,
    pods: str | int | None = "110", labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None, unschedulable: bool = False,
    allocatable: Mapping[str, str] | None = None, capacity: bool = False,
    hostname: bool = False, zone: str | None = None,
) -> dict[str, Any]:
    """A Node as the API server returns it, with what Fluence and the filters read.

    ``status.allocatable`` holds ``cpu``, ``memory``, ``pods`` (left out when None) and
    ``gpus`` as ``nvidia.com/gpu``, then ``allocatable``'s entries over them (extended
    resources, or a quantity written another way); with ``capacity``, ``status.capacity``
    is the same (a kubelet that reserves nothing; the nodes an e2e test creates). The spec
    carries ``taints`` and ``unschedulable`` only when given, as a kubelet-registered node
    does.

    ``hostname`` labels it ``kubernetes.io/hostname=<name>`` as the kubelet does (what a
    hostname topology key reads); ``zone`` labels its ``topology.kubernetes.io/zone``;
    ``labels`` are set over both."""
    status: dict[str, Any] = {"cpu": str(cpu), "memory": memory}
    if pods is not None:
        status["pods"] = str(pods)
    if gpus is not None:
        status[names.GPU_RESOURCE] = str(gpus)
    status.update(allocatable or {})
    body: dict[str, Any] = {}
    if taints:
        body["taints"] = [dict(taint) for taint in taints]
    if unschedulable:
        body["unschedulable"] = True
    node_labels = {names.HOSTNAME_LABEL: name} if hostname else {}
    if zone is not None:
        node_labels[names.ZONE_LABEL] = zone
    node_labels.update(labels or {})
    return {
        "apiVersion": NODES.api_version,
        "kind": NODES.kind,
        "metadata": {"name": name, "labels": node_labels},
        "spec": body,
        "status": {"allocatable": status, **({"capacity": dict(status)} if capacity else {})},
    }


def make_pod_dict(
    name: str, cpu: str | None = "1", memory: str | None = None,
    extra: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
    namespace: str | None = "default", *, labels: Mapping[str, str] | None = None,
    group: str | None = None, gates: Sequence[str] = (), priority: int | None = None,
    scheduler: str = names.SCHEDULER_NAME, node_name: str | None = None,
    limits: Mapping[str, str] | None = None, image: str = "busybox",
    ports: Sequence[Mapping[str, Any]] = (), sidecars: Sequence[Mapping[str, str]] = (),
    init: Sequence[Mapping[str, str]] = (), pod_requests: Mapping[str, str] | None = None,
    uid: str | None = None, resource_version: str | None = None,
    owners: Sequence[Mapping[str, Any]] | None = None,
    more_containers: Sequence[Mapping[str, Any]] = (), **spec: Any,
) -> dict[str, Any]:
    """A Pod with one container ``app`` requesting ``cpu`` (none when None), ``memory`` and
    ``extra``'s resources.

    ``group`` points it at that PodGroup (``spec.schedulingGroup``, what the webhook
    writes; a pod that only carries the group *label* is made with ``labels``);
    ``gates`` are scheduling gates; ``node_name`` binds it; ``spec``'s keys are set over
    the spec last (``tolerations=...``, ``affinity=...``, ``overhead=...``).

    More of the pod, for the tests that need it:

    - ``ports``: the ``app`` container's ports (a ``hostPort`` is what NodePorts reads).
    - ``sidecars``: one init container with ``restartPolicy: Always`` per requests mapping
      (native sidecars: they run beside the app, so their requests are added in full).
    - ``init``: one classic init container per requests mapping, after the sidecars (each
      runs alone before the app: the pod needs the largest, plus the sidecars).
    - ``pod_requests``: the pod-level ``spec.resources.requests``, over the containers'.
    - ``uid``, ``resource_version``: its ``metadata``'s, for what names one version of
      the pod (events, a watch's changes) without an API server to set them.
    - ``namespace`` None: no ``metadata.namespace``, for a pod posted to a real API server
      in a test's namespace (it refuses a body that names another).
    - ``owners``: its ``ownerReferences`` (:func:`job_owner` for one of a Job's pods).
    - ``more_containers``: containers after ``app``, as given (the sidecar container the
      webhook injects into a scout); ``containers=`` in ``spec`` replaces them all."""
    requests: dict[str, Any] = {} if cpu is None else {"cpu": cpu}
    if memory:
        requests["memory"] = memory
    requests.update(extra or {})
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = dict(limits)
    app: dict[str, Any] = {"name": "app", "image": image, "resources": resources}
    if ports:
        app["ports"] = [dict(port) for port in ports]
    body: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [app, *(dict(more) for more in more_containers)]}
    starting = [_init_container(f"sidecar{i}", asks, image, "Always")
                for i, asks in enumerate(sidecars)]
    starting += [_init_container(f"init{i}", asks, image) for i, asks in enumerate(init)]
    if starting:
        body["initContainers"] = starting
    if pod_requests is not None:
        body["resources"] = {"requests": dict(pod_requests)}
    if priority is not None:
        body["priority"] = priority
    if group is not None:
        body["schedulingGroup"] = {"podGroupName": group}
    if gates:
        body["schedulingGates"] = [{"name": gate} for gate in gates]
    if node_name:
        body["nodeName"] = node_name
    body.update(spec)
    metadata: dict[str, Any] = {"name": name, "annotations": dict(annotations or {})}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    if owners is not None:
        metadata["ownerReferences"] = [dict(owner) for owner in owners]
    if uid is not None:
        metadata["uid"] = uid
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {"apiVersion": PODS.api_version, "kind": PODS.kind, "metadata": metadata,
            "spec": body}


def make_resource_slice_dict(
    name: str, driver: str, devices: Sequence[Mapping[str, Any]], *, node: str | None = None,
    node_selector: Mapping[str, Any] | None = None,
    pool: str | None = None, generation: int = 1, slice_count: int = 1,
) -> dict[str, Any]:
    """A ``resource.k8s.io/v1`` ResourceSlice of ``driver``: node-local on ``node``, or
    network-attached to the nodes of ``node_selector`` (neither: to all nodes); the pool
    is named after the node (or the slice) unless ``pool`` says. ``devices`` are
    :func:`make_device`'s."""
    spec: dict[str, Any] = {
        "driver": driver, "devices": [dict(d) for d in devices],
        "pool": {"name": pool or node or name, "generation": generation,
                 "resourceSliceCount": slice_count},
    }
    if node is not None:
        spec["nodeName"] = node
    elif node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    else:
        spec["allNodes"] = True
    return {"apiVersion": RESOURCE_SLICES.api_version, "kind": RESOURCE_SLICES.kind,
            "metadata": {"name": name}, "spec": spec}


def make_device(name: str, attributes: Mapping[str, bool | int | str] | None = None,
                capacity: Mapping[str, str] | None = None, **more: Any) -> dict[str, Any]:
    """One device of a slice: attributes typed from their Python values (``bool``, ``int``,
    ``string``), capacities as quantities; ``more`` is set over it as given."""
    def typed(value: bool | int | str) -> dict[str, Any]:
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        return {kind: value}

    device: dict[str, Any] = {"name": name}
    if attributes:
        device["attributes"] = {k: typed(v) for k, v in attributes.items()}
    if capacity:
        device["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    device.update(more)
    return device


def make_device_class_dict(name: str, *selectors: str,
                           config: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A DeviceClass with CEL ``selectors``."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config:
        spec["config"] = [dict(c) for c in config]
    return {"apiVersion": DEVICE_CLASSES.api_version, "kind": DEVICE_CLASSES.kind,
            "metadata": {"name": name}, "spec": spec}


def make_device_request(name: str, device_class: str, count: int = 1, *selectors: str,
                        mode: str = "ExactCount", **more: Any) -> dict[str, Any]:
    """A claim's request for ``exactly`` ``count`` devices of ``device_class`` (``mode``
    ``All``: every matching one); ``more`` is set over ``exactly`` as given."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    exactly.update(more)
    return {"name": name, "exactly": exactly}


def make_resource_claim_dict(name: str, requests: Sequence[Mapping[str, Any]], *,
                             constraints: Sequence[Mapping[str, Any]] = (),
                             namespace: str | None = "default",
                             owners: Sequence[Mapping[str, Any]] | None = None,
                             ) -> dict[str, Any]:
    """A ResourceClaim with ``requests`` (:func:`make_device_request`'s, or
    ``firstAvailable`` ones as given) and ``constraints``."""
    devices: dict[str, Any] = {"requests": [dict(r) for r in requests]}
    if constraints:
        devices["constraints"] = [dict(c) for c in constraints]
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if owners is not None:
        metadata["ownerReferences"] = [dict(o) for o in owners]
    return {"apiVersion": RESOURCE_CLAIMS.api_version, "kind": RESOURCE_CLAIMS.kind,
            "metadata": metadata, "spec": {"devices": devices}}


def claim_entries(**claims: str) -> list[dict[str, str]]:
    """A pod's ``spec.resourceClaims``: each keyword names a claim (``gpu="my-claim"``);
    a value starting ``template:`` names a ResourceClaimTemplate instead."""
    entries = []
    for entry, target in claims.items():
        if target.startswith("template:"):
            entries.append({"name": entry, "resourceClaimTemplateName": target[9:]})
        else:
            entries.append({"name": entry, "resourceClaimName": target})
    return entries


def job_owner(name: str, uid: str) -> dict[str, Any]:
    """The owner reference a Job's pods carry: Job ``name`` (uid ``uid``) is their
    controller, as the job controller writes it."""
    return {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
            "controller": True}


def _init_container(name: str, requests: Mapping[str, str], image: str,
                    restart: str | None = None) -> dict[str, Any]:
    """An init container of :func:`make_pod_dict` (``restart="Always"``: a native sidecar)."""
    made: dict[str, Any] = {"name": name, "image": image,
                            "resources": {"requests": dict(requests)}}
    if restart is not None:
        made["restartPolicy"] = restart
    return made


def make_split_pod(name: str, group: str, role: str | None = None, *,
                   gates: Sequence[str] = (), image: str = "busybox") -> dict[str, Any]:
    """A pod of shared hybrid group ``group``, asking for no CPU. With ``role``
    (``names.ROLE_SCOUT`` or ``names.ROLE_WORKER``) it is one of the split's: labelled so and
    controlled by the group's Indexed Job (uid ``<group>-job-uid``: a scout releases only
    its own Job's workers); without, a pod that merely carries the group label.
    ``gates`` are its scheduling gates (a worker waits behind ``names.QUANTUM_GATE``)."""
    labels = {names.GROUP_LABEL: group}
    if role:
        labels[names.ROLE_LABEL] = role
    owners = [job_owner(group, f"{group}-job-uid")] if role else None
    return make_pod_dict(name, None, labels=labels, gates=gates, image=image, owners=owners)


def make_pod_group_dict(name: str, min_count: int | None, namespace: str = "default", *,
                        topology: Sequence[str] = (),
                        annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ``scheduling.k8s.io`` PodGroup: a gang of ``min_count``, or ``basic`` when None
    (or 0): each member placed on its own. ``topology`` are the label keys of its required
    topology constraint (``spec.schedulingConstraints``: the whole group in one domain);
    ``annotations`` go on its metadata (Kueue's slices, say)."""
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": key} for key in topology]}
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": PODGROUPS.kind,
        "metadata": {"name": name, "namespace": namespace,
                     **({"annotations": dict(annotations)} if annotations else {})},
        "spec": spec,
    }


def indexed_job_pods(job: dict[str, Any], **spec: Any) -> list[dict[str, Any]]:
    """The pods the job controller makes for an Indexed Job, one per completion index.

    Each is named ``<job>-<index>`` (the controller adds a random suffix; tests name
    pods they can find), carries the index label and annotation, is controlled by
    the Job (its uid) and has a copy of the template's spec, with ``spec``'s keys
    set over it (``schedulingGroup=...``, say). For tests without a controller manager.
    """
    template, meta = job["spec"]["template"], job["metadata"]
    made = []
    for index in range(job["spec"]["completions"]):
        pod_meta = {
            "name": f"{meta['name']}-{index}",
            "namespace": meta.get("namespace", "default"),
            "labels": {**template["metadata"].get("labels", {}),
                       names.JOB_COMPLETION_INDEX: str(index)},
            "annotations": {**template["metadata"].get("annotations", {}),
                            names.JOB_COMPLETION_INDEX: str(index)},
            "ownerReferences": [job_owner(meta["name"], meta["uid"])],
        }
        made.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
                     "spec": {**copy.deepcopy(template["spec"]), **spec}})
    return made


@pytest.fixture
def braket_config() -> ResourceConfig:
    """The Braket example: one rigetti_cepheus qdevice -> qpu -> 80 qubits."""
    return parse_resource_config(BRAKET_EXAMPLE, "braket-example.yaml")


@pytest.fixture
def small_graph(braket_config: ResourceConfig) -> ResourceGraph:
    """Four 8-core nodes with 8 GiB each, plus the Braket example."""
    return ResourceGraph(make_nodes(4), braket_config)


@pytest.fixture
def pod_group() -> Group:
    """A gang of three 2-core pods."""
    return Group("gang", tuple(PodRequest(f"p{i}", cores=2) for i in range(3)))


@pytest.fixture
def fake_cluster() -> FakeCluster:
    """An empty in-memory cluster with the API server's semantics (what the scheduler,
    the webhook and the sidecar are tested against)."""
    return FakeCluster()


@pytest.fixture
def vendor_clock() -> VirtualClock:
    """Virtual time for a fake vendor queue and the sidecar: ``sleep`` advances it."""
    return VirtualClock()


@pytest.fixture
def fake_vendor_queue(vendor_clock: VirtualClock) -> FakeQueueProvider:
    """A provider serving ``provider=fake`` over scripted tasks (``tasks[pod_uid] =
    FakeTask(job_id, [(time, position, state), ...])``) that move in ``vendor_clock`` time."""
    return FakeQueueProvider(vendor_clock)


def provider_conformance(make_double: Callable[[], VendorDouble]) -> Callable[[Case], None]:
    """The provider conformance suite as one parametrized test, for a test module::

        test_provider_conformance = provider_conformance(MyVendorDouble)
    """

    @pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
    def test_provider_conformance(case: Case) -> None:
        """One behaviour of the provider contract (:mod:`fluence_core.runtime.conformance`)."""
        run_case(case, make_double)

    return test_provider_conformance


_KINDS: dict[str, Resource] = {resource.kind: resource for resource in (
    NODES, PODS, PODGROUPS, RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS)}


class SchedulerHarness:
    """A scheduler over an in-memory cluster, driven one cycle at a time, with no threads.

    Every installed plugin takes part, as in a real scheduler, so a plugin's test sees
    its hooks called in a real cycle: add Nodes and Pods, call :meth:`cycle`, then ask
    where a pod went (:meth:`node_of`). Time is virtual: :meth:`cycle` moves the clock.
    """

    PAST_ANY_BACKOFF = 60.0
    """Longer than any backoff (``pod_max_backoff_seconds`` is 10 by default)."""

    def __init__(self, cluster: FakeCluster | None = None, config: ResourceConfig | None = None,
                 settings: Settings | None = None) -> None:
        self.cluster = cluster if cluster is not None else FakeCluster()
        self.config = config
        self.settings = settings
        self.now = 0.0
        """The scheduler's virtual clock (seconds): :meth:`cycle` moves it on."""
        self.scheduler = self.new_scheduler()

    def clock(self) -> float:
        return self.now

    def new_scheduler(self) -> Scheduler:
        """A scheduler started over the harness's cluster (what a restart makes)."""
        scheduler = Scheduler(self.cluster, self.settings or load_settings(), config=self.config,
                              clock=self.clock)
        scheduler.start()
        return scheduler

    def restart(self) -> Scheduler:
        self.scheduler = self.new_scheduler()
        return self.scheduler

    def cycle(self, after: float = PAST_ANY_BACKOFF) -> list[Any]:
        """Apply the cluster's events, run one cycle, apply its own events; ``after``
        seconds after the last cycle (by default past any backoff, so a group that failed
        is tried again at once)."""
        self.now += after
        self.scheduler.pump()
        results = self.scheduler.schedule_once()
        self.scheduler.pump()
        return results

    def add(self, *objects: dict[str, Any]) -> None:
        """Create Nodes, Pods, PodGroups and DRA objects (dicts such as :func:`make_node_dict`
        and :func:`make_resource_slice_dict` build)."""
        for obj in objects:
            self.cluster.create(_KINDS[obj["kind"]], obj, obj["metadata"].get("namespace"))

    def namespaces(self, *names_: str) -> None:
        """Create namespaces (``default`` is there already, as on a new cluster)."""
        for name in names_:
            self.cluster.create(NAMESPACES, {"metadata": {"name": name}})

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        """Where the pod was bound; ``None`` while it waits."""
        found = self.cluster.get(PODS, name, namespace)
        assert found is not None, f"no pod {namespace}/{name}"
        node: str | None = found["spec"].get("nodeName")
        return node

    def finish(self, name: str, phase: str = "Succeeded", namespace: str = "default") -> None:
        """End the pod as its kubelet would, in ``phase``."""
        self.cluster.patch_status(PODS, name, {"status": {"phase": phase}}, namespace)


@pytest.fixture
def scheduler_harness() -> SchedulerHarness:
    """A :class:`SchedulerHarness` over an empty in-memory cluster."""
    return SchedulerHarness()
