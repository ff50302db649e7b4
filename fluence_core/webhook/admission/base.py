"""What a webhook handler is, and the context it runs in.

A handler is any object with a ``name``, an ``applies(pod)`` test and a
``mutate(pod, ctx)`` step returning a JSON patch (a list of operations) against
the pod it was given. A handler of other kinds (a Job, a JobSet) says which in
an optional ``resources`` attribute — ``"group/plural"`` strings, ``"pods"`` for
the core group — and then receives those objects instead; without it a handler
sees pods only. Handlers must be idempotent: the API server may call the
webhook again for a pod Fluence already mutated, and the answer must then be an
empty patch. Handlers never write to the cluster: admission has no side effects
(the webhook configuration says ``sideEffects: None``), since anyone who reaches
the webhook's port can POST a review. What an admitted object needs is made from
the stored object by the webhook's controller (:mod:`~fluence_core.webhook.controller.controller`;
a plugin's handler joins it as a :class:`~fluence_core.webhook.controller.controller.Reconciler`).

The same :class:`AdmissionContext` is what ``fluence_admit`` receives: besides
the request it carries the host's clock and the service's :class:`ServiceState`,
where a plugin keeps what must outlive one request (admission control's
promises), so no plugin needs a process-wide object.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Hashable,
    Iterator,
    Mapping,
    Protocol,
    Sequence,
    TypeVar,
    cast,
    runtime_checkable,
)

from fluence_core.kube.api import ClusterAPI
from fluence_core.errors import AdmissionDenied as AdmissionDenied  # what a handler raises
from fluence_core.resource_config import ResourceConfig
from fluence_core.settings import Settings
from fluence_core.kube.patch import JsonPatch
from fluence_core.webhook.controller.informer import Watched
from fluence_core.webhook.controller.recent import Recent


POD_RESOURCE = "pods"
DEFAULT_ORDER = 100


@runtime_checkable
class Handler(Protocol):
    """One admission step.

    A handler subclasses this protocol: it must give ``name``, ``applies`` and
    ``mutate``, and inherits the optional members' defaults (``order``,
    ``resources``, ``match_condition``, ``env_contract``) unless it sets its own. The webhook reads
    every member directly, so an object that is not a Handler is refused when
    the webhook starts, naming what it lacks.
    """

    name: str
    """Unique among the handlers; what ``FLUENCE_WEBHOOK_HANDLERS`` names."""
    order: int = DEFAULT_ORDER
    """Default position: lower runs first, ties by name."""
    resources: tuple[str, ...] = (POD_RESOURCE,)
    """The kinds it is sent: ``"pods"``, or ``"group/plural"`` (``"batch/jobs"``)."""
    match_condition: str | None = None
    """A pod handler's CEL expression over ``object``, true for every pod it may change,
    refuse or act on; the API server sends only pods some handler's is true for
    (:mod:`~fluence_core.webhook.cel`). None: it must see every pod, and then the
    webhook is called for every Fluence pod."""

    def applies(self, pod: Mapping[str, Any]) -> bool:
        """Whether this handler has anything to say about ``pod``."""
        ...

    def mutate(self, pod: Mapping[str, Any], ctx: "AdmissionContext") -> JsonPatch:
        """The JSON patch for ``pod`` (empty when it is already mutated)."""
        ...

    def env_contract(self) -> Sequence[tuple[str, str]]:
        """``(env variable, source)`` for every variable it injects (logged at start)."""
        return ()


HANDLER_MEMBERS = ("name", "order", "resources", "match_condition", "applies", "mutate",
                   "env_contract")


T = TypeVar("T")


class ServiceState:
    """Objects plugins keep for the life of one admission service (one webhook process,
    one simulated run), each made once even when requests arrive on several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, object] = {}

    def get(self, key: str, create: Callable[[], T]) -> T:
        """The object under ``key`` (a plugin prefixes keys with its name), made by
        ``create`` the first time."""
        with self._lock:
            if key not in self._objects:
                self._objects[key] = create()
            return cast(T, self._objects[key])


@dataclass
class AdmissionContext:
    """What a handler knows about the request beyond the pod."""

    settings: Settings
    cluster: ClusterAPI | None
    namespace: str
    dry_run: bool = False
    resource_config: ResourceConfig = field(default_factory=ResourceConfig)
    uid: str = ""
    warnings: list[str] = field(default_factory=list)
    current_handler: str = ""
    clock: Callable[[], float] = time.monotonic
    """The host's clock in seconds: monotonic in the webhook, virtual in ``fluence sim``."""
    state: ServiceState = field(default_factory=ServiceState)
    """What plugins keep across this service's requests."""
    writing: Callable[[Hashable], bool] = field(default=lambda key: False)
    """Whether the service's background writer holds a write of ``key`` (queued or being
    made by the controller): what such a write makes is on its way."""
    watched: Watched = field(default_factory=Watched)
    """The service's informers: PodGroups and labelled Jobs looked up without a call."""

    def warn(self, message: str) -> None:
        """A warning the API server shows the user (kubectl prints it)."""
        self.warnings.append(message)

    @property
    def recent(self) -> Recent:
        """What this service's requests read or made in the last few seconds."""
        return recent_of(self.state, self.clock)

    def cached(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """A cluster read, shared with this service's requests for a few seconds
        (:data:`~fluence_core.webhook.controller.recent.TTL`)."""
        return self.recent.get(key, compute)

    def require_cluster(self) -> ClusterAPI:
        if self.cluster is None:
            raise AdmissionDenied("this webhook has no cluster connection")
        return self.cluster


def recent_of(state: ServiceState, clock: Callable[[], float]) -> Recent:
    """The :class:`Recent` memo a service's requests (and its loops) share."""
    return state.get("webhook:recent", lambda: Recent(clock=clock))


def resource_key(group: str, plural: str) -> str:
    """``"pods"`` for the core group, ``"batch/jobs"`` otherwise: how handlers name kinds."""
    return f"{group}/{plural}" if group else plural


def resources_of(handler: Handler) -> tuple[str, ...]:
    """The kinds a handler is sent (a lone string counts as one kind)."""
    declared: str | Sequence[str] = handler.resources
    return (declared,) if isinstance(declared, str) else tuple(declared)


def env_contract_of(handlers: Sequence[Handler]) -> Iterator[tuple[str, str, str]]:
    """``(handler, env variable, source)`` for every variable a handler injects."""
    for handler in handlers:
        for variable, source in handler.env_contract():
            yield handler.name, variable, source
