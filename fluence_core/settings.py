"""Fluence's own ``FLUENCE_*`` settings, grouped by the feature that reads them, and the
base class every plugin's settings derive from.

:class:`SettingsVariables` declares and checks each variable (one pydantic field each,
flat, since the variables' names are the user's API); :class:`Settings` is what code
reads: frozen groups such as ``settings.webhook`` or ``settings.scheduling``, in the
way kopf groups its settings, so a setting's home says which feature uses it
(:data:`PLACES` maps each variable to its group). A bad value fails with a message
naming the variable, so an operator knows which line of a Deployment to fix. A
plugin's settings live in its own class under a prefix of its own
(``FLUENCE_ADMISSION_*``, ``FLUENCE_FLUX_*``...), contributed through the
``fluence_settings`` hook so ``fluence settings`` lists them beside the core's.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Final, Self

from pydantic import (
    AliasChoices,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from fluence_core import names
from fluence_core.errors import SettingsError, TopologyError
from fluence_core.topology import Level, parse_levels

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)

KUBE_QPS = 50.0
KUBE_BURST = 100
"""Client-side API limits by default: kube-scheduler's own (clientConnection qps 50, burst
100), so the two are compared on equal terms and a real API server's priority and fairness,
not a small client bucket, paces a burst of bindings."""


SCHEDULER: Final = "scheduler"
WEBHOOK: Final = "webhook"
SIDECAR: Final = "sidecar"
SCOUT: Final = "scout"
"""The scout's app containers (the staged interceptor)."""
CLI: Final = "cli"
COMPONENTS: Final = (SCHEDULER, WEBHOOK, SIDECAR, SCOUT, CLI)
"""Who reads a setting (``fluence settings`` shows it): the processes Fluence runs, and the
scout's sidecar and app containers, whose settings the webhook writes into the pod."""
POD_COMPONENTS: Final = (SIDECAR, SCOUT)


def _reads(*components: str, per_pod: bool = False) -> dict[str, Any]:
    """Field metadata: the components that read a setting. A setting read in the scout's pod
    is copied there by the webhook from its own value, unless ``per_pod`` (the pod's own
    value: downward API, or fixed by the webhook)."""
    return {"read_by": list(components), "per_pod": per_pod}


class MatchPolicy(str, Enum):
    """Fluxion's match policies; each means here what it means in Fluxion."""

    FIRST = "first"
    LOW = "low"
    HIGH = "high"
    LONODE = "lonode"
    HINODE = "hinode"


class Switch(str, Enum):
    ON = "on"
    OFF = "off"


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class SettingsVariables(BaseSettings):
    """Fluence's ``FLUENCE_*`` variables as the environment holds them, one field each.

    This is where a variable is declared, read and checked (and what ``fluence
    settings`` lists); code reads it through :class:`Settings`, grouped by the feature
    that uses it.
    """

    model_config = SettingsConfigDict(
        env_prefix=names.SETTINGS_ENV_PREFIX,
        case_sensitive=False,
        extra="ignore",
        env_ignore_empty=True,  # FLUENCE_RESOURCES="" means absent, not the directory "."
        allow_inf_nan=False,  # FLUENCE_KUBE_QPS=nan would pass "gt=0" checks by failing every one
    )

    resources: Path | None = Field(
        json_schema_extra=_reads(SCHEDULER, WEBHOOK, CLI),
        default=None, description="Path to resources.yaml; absent means classical resources only."
    )
    match_policy: MatchPolicy = Field(
        json_schema_extra=_reads(SCHEDULER, CLI),
        default=MatchPolicy.FIRST, description="Matcher policy."
    )
    worker_timeout: float = Field(
        json_schema_extra=_reads(SIDECAR),
        default=0, ge=0, description="Seconds the sidecar waits for workers; 0 waits forever."
    )
    session_hold_timeout: float = Field(
        json_schema_extra=_reads(SCOUT),
        default=0, ge=0, description="Seconds the scout holds its session; 0 holds forever."
    )
    disable_plugins: Annotated[list[str], NoDecode] = Field(
        json_schema_extra=_reads(SCHEDULER, WEBHOOK, SIDECAR, CLI),
        default_factory=list, description="Comma-separated plugin names never to load."
    )
    preference_tiers: int = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=3, ge=0, le=16,
        description="Preference tiers a group is matched against before its whole feasible set "
        "(kube-scheduler's soft preferences, best first); 0 ignores preferences.",
    )
    pod_initial_backoff_seconds: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=1.0, ge=0,
        description="kube-scheduler's podInitialBackoffSeconds: a group that failed waits this "
        "long before it is tried again, doubled at each failed attempt; 0 turns backoff off.",
    )
    pod_max_backoff_seconds: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=10.0, ge=0,
        description="kube-scheduler's podMaxBackoffSeconds: the longest a failed group waits "
        "for its backoff.",
    )
    reserve_after_seconds: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=10.0, ge=0,
        description="A ready group that has waited this long and still does not fit reserves "
        "the room it will take (scheduler/reservations.py): later pods may use that room only "
        "if their activeDeadlineSeconds ends before the reservation starts. 0 turns "
        "reservations off.",
    )
    reserve_depth: int = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=16, ge=1,
        description="At most this many groups hold a reservation at once, the first in the "
        "queue's order (Fluxion's reservation depth): each costs a plan at every attempt.",
    )
    arrival_report_seconds: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=1.0, ge=0,
        description="A gang whose members (or PodGroup) are still arriving is told why it "
        "waits (FailedScheduling events, PodScheduled=False) only once it has waited this long, "
        "then at most this often; kube-scheduler's PreEnqueue tells nothing. 0 tells at once.",
    )
    cycle_budget_seconds: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=0.25, ge=0,
        description="A scheduling cycle that has run this long ends early once new pods have "
        "arrived, so a pass over a long backlog never keeps them waiting; the groups it did "
        "not reach are taken by the next cycle. 0: a cycle always goes through every group.",
    )
    percentage_of_nodes_to_score: int = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=0, ge=0, le=100,
        description="kube-scheduler's percentageOfNodesToScore: a lone pod whose filters read "
        "the placed pods (affinity, spread) stops its search once this share of the nodes "
        "is feasible, at least 100 nodes; 0 is kube-scheduler's adaptive default "
        "(50 - nodes/125 percent, at least 5), 100 asks every node.",
    )
    topology_levels: Annotated[list[str], NoDecode] = Field(
        json_schema_extra=_reads(SCHEDULER, CLI),
        default_factory=list,
        description="Comma-separated node labels, widest first (zone, block, rack): the graph's "
        "topology levels when resources.yaml has no topology.levels (both set must agree).",
    )
    memory_chunks_per_core: int = Field(
        json_schema_extra=_reads(SCHEDULER, CLI),
        default=1, ge=1, description="Memory vertices per core in the graph."
    )
    kube_qps: float = Field(
        json_schema_extra=_reads(SCHEDULER, WEBHOOK),
        default=KUBE_QPS, gt=0,
        description="API requests per second (token bucket; events have a bucket of their own).",
    )
    kube_burst: int = Field(
        json_schema_extra=_reads(SCHEDULER, WEBHOOK),
        default=KUBE_BURST, ge=1, description="Token bucket burst size."
    )
    pod_uid: str | None = Field(
        json_schema_extra=_reads(SIDECAR, per_pod=True),
        default=None, description="This pod's uid (downward API)."
    )
    pod_name: str | None = Field(
        json_schema_extra=_reads(SIDECAR, per_pod=True),
        default=None, description="This pod's name (downward API)."
    )
    pod_namespace: str | None = Field(
        json_schema_extra=_reads(SIDECAR, per_pod=True),
        default=None, description="This pod's namespace (downward API)."
    )
    runtime_dir: Path = Field(
        json_schema_extra=_reads(SIDECAR, SCOUT, per_pod=True),
        default=Path(names.RUNTIME_MOUNT),
        description="Directory the scout's app and its sidecar share "
        "(job records, release marker).",
    )
    sidecar_poll_interval: float = Field(
        json_schema_extra=_reads(SIDECAR),
        default=10.0, gt=0, description="Seconds between the sidecar's queue polls."
    )
    ungate_position: int = Field(
        json_schema_extra=_reads(SIDECAR),
        default=1,
        ge=0,
        description="Ungate workers when the scout's task is at or under this queue position.",
    )
    find_task_timeout: float = Field(
        json_schema_extra=_reads(SIDECAR),
        default=600.0,
        ge=0,
        description="Seconds the sidecar looks for the scout's task; 0 looks forever.",
    )
    observe_only: bool = Field(
        json_schema_extra=_reads(SIDECAR),
        default=False, description="The sidecar records the queue series and ungates nothing."
    )
    log_level: str = Field(
        json_schema_extra=_reads(SCHEDULER, WEBHOOK, SIDECAR, CLI),
        default="INFO", description="Log level of the fluence logger."
    )
    bind_workers: int | None = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=None,
        ge=0,
        le=64,
        description="Threads binding pods while the next groups are matched "
        "(0: bind in the scheduling loop; unset: sized from kube_qps, 8 to 32).",
    )
    watch_chunk: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=60.0, gt=0, le=3600,
        description="Seconds of one watch request of `fluence up` (each resumes where the "
        "last ended; shorter: a lost leadership stops the watches sooner).",
    )
    metrics_port: int = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=9402,
        ge=0,
        le=65535,
        description="Prometheus metrics port of `fluence up` (0: off).",
    )
    metrics_bind_address: str = Field(
        json_schema_extra=_reads(SCHEDULER),
        default="0.0.0.0",
        description="IP address the metrics port listens on (127.0.0.1: this host only; "
        "'::' for IPv6).",
    )
    leader_elect: bool = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=True, description="Take a Lease before scheduling, so one replica schedules."
    )
    lease_name: str = Field(
        json_schema_extra=_reads(SCHEDULER),
        default="fluence-scheduler", description="The leader-election Lease's name."
    )
    lease_namespace: str | None = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=None,
        description="The leader-election Lease's namespace; unset: the pod's own in cluster, "
                    "else kube-system (where kube-scheduler keeps its Lease).",
    )
    lease_duration: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=15, gt=0, description="Seconds a leader's Lease lasts without renewal."
    )
    lease_renew: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=5, gt=0, description="Seconds between Lease renewals."
    )
    webhook_handlers: Annotated[list[str], NoDecode] = Field(
        json_schema_extra=_reads(WEBHOOK),
        default_factory=list,
        description="Comma-separated webhook handlers to run, in order; "
        "empty runs all in default order. A plugin whose every handler is left out "
        "serves no routes and runs no loops in the webhook.",
    )
    webhook_port: int = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=8443, ge=1, le=65535,
        description="HTTPS port of admission (AdmissionReviews): only the API server needs to "
        "reach it.",
    )
    report_port: int = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=8444, ge=1, le=65535,
        description="HTTPS port of the webhook's routes for pods (the scouts' reports) and of "
        "its health probes; never serves admission.",
    )
    webhook_bind_address: str = Field(
        json_schema_extra=_reads(WEBHOOK),
        default="0.0.0.0",
        description="IP address the webhook's HTTPS port listens on ('::' for IPv6).",
    )
    webhook_cert_dir: Path | None = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=None,
        description="Directory with a mounted tls.crt/tls.key; absent means self-managed TLS.",
    )
    webhook_client_ca: Path | None = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=None,
        description="PEM file of the CA(s) whose client certificates alone may connect to the "
        "admission port: the API server presents one named by its AdmissionConfiguration's "
        "kubeConfigFile (docs/webhook-client-auth.md); others are refused during the TLS "
        "handshake. Unset: any client may connect (a forged review makes nothing).",
    )
    webhook_service: str = Field(
        json_schema_extra=_reads(WEBHOOK),
        default="fluence-webhook", description="The webhook's Service name."
    )
    webhook_namespace: str = Field(
        json_schema_extra=_reads(WEBHOOK),
        default="fluence-system", description="The webhook's namespace."
    )
    webhook_config: str = Field(
        json_schema_extra=_reads(WEBHOOK),
        default="fluence-webhook",
        description="MutatingWebhookConfiguration whose caBundle self-managed TLS patches.",
    )
    webhook_repair_interval: float = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=60.0, ge=0,
        description="Seconds between the webhook's looks for unscheduled grouped pods whose "
        "PodGroup is missing (lost with a killed webhook's queue), which it re-creates; also "
        "once at start. 0: never.",
    )
    webhook_podgroup_cleanup: float = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=60.0, ge=0,
        description="Seconds between the webhook's looks for PodGroups it made that no Job owns "
        "(bare pods' gangs) and that no live pod points at any more, which it deletes once "
        "older than FLUENCE_WEBHOOK_PODGROUP_GRACE. 0: never.",
    )
    webhook_podgroup_grace: float = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=120.0, ge=0,
        description="Seconds a PodGroup no Job owns is kept after it was made even with no "
        "live pod pointing at it (its gang's pods may still be on their way).",
    )
    runtime_image: str = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=names.IMAGE,
        description="Image of the stage init container and the sidecar.",
    )
    quantum_gate: str = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=names.QUANTUM_GATE,
        description="Scheduling gate shared-coordination workers wait behind.",
    )
    orphan_sweep: float = Field(
        json_schema_extra=_reads(WEBHOOK),
        default=30, ge=0,
        description="Seconds between the webhook's sweeps for gated workers whose scout pod "
        "ended or went away before reporting; they are released as "
        f"{names.SCOUT_STATUS_LOST!r} once seen so on two sweeps in a row (0: off).",
    )
    backend_refresh: float = Field(
        json_schema_extra=_reads(SCHEDULER),
        default=0, ge=0,
        description="Seconds between asking each provider for backend prices, queues and "
        f"status, written to the {names.BACKENDS_CONFIGMAP} ConfigMap in Fluence's namespace "
        "for `kubectl fluence select` (0: off).",
    )

    report_url: str | None = Field(
        json_schema_extra=_reads(WEBHOOK, SIDECAR),
        default=None,
        description="Where the scout's sidecar sends its reports; unset: the webhook's Service, "
        f"https://<webhook_service>.<webhook_namespace>.svc:<report_port>{names.REPORT_PATH}.",
    )
    report_audience: str = Field(
        json_schema_extra=_reads(WEBHOOK),
        default="fluence", min_length=1,
        description="Audience of the sidecar's projected token; reports with a token for "
        "any other audience are refused.",
    )
    report_ca: str | None = Field(
        json_schema_extra=_reads(WEBHOOK, SIDECAR),
        default=None,
        description="PEM of the CA the sidecar trusts for its reports; unset on the webhook: "
        "its own serving CA.",
    )
    report_token_file: Path = Field(
        json_schema_extra=_reads(SIDECAR, per_pod=True),
        default=Path(names.REPORT_TOKEN_MOUNT) / names.REPORT_TOKEN_FILE,
        description="The sidecar's projected token for its reports (mounted by the webhook).",
    )

    _split_disable = field_validator("disable_plugins", mode="before")(_split_csv)
    _split_levels = field_validator("topology_levels", mode="before")(_split_csv)

    @field_validator("topology_levels")
    @classmethod
    def _levels(cls, value: list[str]) -> list[str]:
        try:
            parse_levels(value, "levels")
        except TopologyError as error:
            raise ValueError(str(error)) from None
        return value

    @field_validator("match_policy", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        """``ON``, ``First``: enum values are read case-insensitively."""
        return value.strip().lower() if isinstance(value, str) else value
    _split_handlers = field_validator("webhook_handlers", mode="before")(_split_csv)

    @field_validator("metrics_bind_address", "webhook_bind_address")
    @classmethod
    def _ip_address(cls, value: str) -> str:
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ValueError("expected an IP address to listen on, such as 0.0.0.0 or"
                             " 127.0.0.1") from None

    @field_validator("report_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("https://"):
            raise ValueError("expected an https:// URL (the token must not travel in clear)")
        return value

    @field_validator("report_port")
    @classmethod
    def _own_port(cls, value: int, info: ValidationInfo) -> int:
        if value == info.data.get("webhook_port"):
            raise ValueError("the webhook's port (FLUENCE_WEBHOOK_PORT) too: reports need a "
                             "port of their own, apart from admission")
        return value

    @model_validator(mode="after")
    def _report_url(self) -> Self:
        if self.report_url is None:
            self.report_url = (f"https://{self.webhook_service}.{self.webhook_namespace}.svc"
                               f":{self.report_port}{names.REPORT_PATH}")
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: object) -> object:
        if isinstance(value, str):
            level = value.strip().upper()
            if level not in names.LOG_LEVELS:
                raise ValueError(f"expected one of {', '.join(names.LOG_LEVELS)}")
            return level
        return value

    @field_validator("lease_name", "lease_namespace", "webhook_service", "webhook_namespace",
                     "webhook_config")
    @classmethod
    def _kube_name(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > 63 or not _DNS_LABEL.fullmatch(value)):
            raise ValueError("expected a Kubernetes name: at most 63 lower-case letters, digits"
                             " and '-', starting and ending with a letter or digit")
        return value


class PluginSettings(BaseSettings):
    """The base of a plugin's own settings: environment variables under its own prefix.

    A subclass sets ``model_config = SettingsConfigDict(env_prefix="FLUENCE_<PLUGIN>_")``
    (the rest of the configuration is inherited), reads itself with :meth:`load`
    and returns its class from the ``fluence_settings`` hook, so ``fluence
    settings`` lists its variables. A variable renamed under the new prefix stays
    readable by its old name with ``validation_alias=AliasChoices(new, old)``;
    the first choice is the name Fluence shows.
    """

    model_config = SettingsConfigDict(
        case_sensitive=False, extra="ignore", env_ignore_empty=True, populate_by_name=True,
        allow_inf_nan=False,
    )

    @classmethod
    def load(cls, **overrides: object) -> Self:
        """Read the settings, turning validation failures into a :class:`SettingsError`."""
        try:
            return cls(**overrides)
        except ValidationError as error:
            raise SettingsError(_describe(error, cls)) from None


def env_names(cls: type[BaseSettings], field: str) -> list[str]:
    """The environment variables that set ``field``: the one shown first, then old names."""
    alias = cls.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return [choice.upper() for choice in alias.choices if isinstance(choice, str)]
    if isinstance(alias, str):
        return [alias.upper()]
    prefix = str(cls.model_config.get("env_prefix") or "")
    return [(prefix + field).upper()]


def _variable_of(cls: type[BaseSettings], loc: str) -> str:
    """The variable to name for a bad value at ``loc`` (a field, or the alias validation
    reports): the one the environment sets, so an old name is named as the user wrote it."""
    candidates = [loc.upper()]
    for field in cls.model_fields:
        if loc == field or loc.upper() in env_names(cls, field):
            candidates = env_names(cls, field)
    present = {name.upper() for name in os.environ}
    return next((name for name in candidates if name in present), candidates[0])


def _describe(error: ValidationError, cls: type[BaseSettings]) -> str:
    lines = []
    for problem in error.errors():
        variable = _variable_of(cls, str(problem["loc"][0])) if problem["loc"] else "?"
        lines.append(f"{variable}={problem.get('input')!r}: {problem['msg']}")
    owner = "Fluence settings" if cls is SettingsVariables else f"settings ({cls.__name__})"
    return f"invalid {owner}: " + "; ".join(lines)


def load_settings(**overrides: object) -> Settings:
    """Read the settings; a keyword overrides the variable it names in lower case, without
    the prefix (``watch_chunk=5`` for ``FLUENCE_WATCH_CHUNK=5``). A bad value raises a
    :class:`SettingsError` naming the variable."""
    return Settings(**overrides)


@dataclass(frozen=True)
class SettingRow:
    """One line of ``fluence settings``."""

    variable: str
    value: object
    default: object
    meaning: str
    read_by: tuple[str, ...] = ()
    """The components that read it (empty: not said; a plugin's own are its plugin's)."""


def setting_rows(settings: BaseSettings | Settings) -> list[SettingRow]:
    """Every variable of ``settings``' class with its current value, default and meaning
    (old names a variable is still read from are named in the meaning)."""
    if isinstance(settings, Settings):
        settings = settings.variables
    cls = type(settings)
    rows = []
    for field, info in cls.model_fields.items():
        variable, *old = env_names(cls, field)
        meaning = info.description or ""
        if old:
            meaning += f" (also read from {', '.join(old)})"
        default = info.get_default(call_default_factory=True)
        rows.append(SettingRow(variable, getattr(settings, field), default, meaning,
                               readers_of(cls, field)))
    return rows


def _extra(cls: type[BaseSettings], field: str) -> dict[str, Any]:
    extra = cls.model_fields[field].json_schema_extra
    return extra if isinstance(extra, dict) else {}


def readers_of(cls: type[BaseSettings], field: str) -> tuple[str, ...]:
    """The components that read ``field`` of ``cls`` (see :data:`COMPONENTS`)."""
    readers = _extra(cls, field).get("read_by") or ()
    return tuple(str(reader) for reader in readers)


def env_value(value: object) -> str:
    """A setting's value as its environment variable spells it (pydantic reads it back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _pod_env(variables: SettingsVariables, component: str) -> tuple[dict[str, str], ...]:
    """The env entries the webhook writes into the scout's ``component`` (``sidecar`` or
    ``scout``): every setting that component reads, at this process's value, except the
    per-pod ones (downward API, or fixed by the webhook) and unset ones."""
    cls = type(variables)
    entries = []
    for field in cls.model_fields:
        extra = _extra(cls, field)
        value = getattr(variables, field)
        if component not in readers_of(cls, field) or extra.get("per_pod") or value is None:
            continue
        if text := env_value(value):  # "" would read as unset anyway
            entries.append({"name": env_names(cls, field)[0], "value": text})
    return tuple(entries)


# -- the settings, grouped by the feature that reads them ------------------------------


@dataclass(frozen=True, slots=True)
class GraphSettings:
    """The resource graph and its matcher (scheduler, webhook, ``fluence graph``)."""

    resources: Path | None
    match_policy: MatchPolicy
    topology_levels: tuple[str, ...]
    memory_chunks_per_core: int

    @property
    def levels(self) -> tuple[Level, ...]:
        """:attr:`topology_levels` as :class:`~fluence_core.topology.Level` values."""
        return parse_levels(list(self.topology_levels),
                            names.SETTINGS_ENV_PREFIX + "TOPOLOGY_LEVELS")


@dataclass(frozen=True, slots=True)
class KubeSettings:
    """The client's own limits on the API server (token bucket)."""

    qps: float
    burst: int


@dataclass(frozen=True, slots=True)
class SchedulingSettings:
    """The scheduling loop: preferences, backoff, reservations, cycles, binding, watches."""

    preference_tiers: int
    pod_initial_backoff_seconds: float
    pod_max_backoff_seconds: float
    reserve_after_seconds: float
    reserve_depth: int
    arrival_report_seconds: float
    cycle_budget_seconds: float
    percentage_of_nodes_to_score: int
    bind_workers: int | None
    watch_chunk: float
    backend_refresh: float
    bind_pool: int
    """``bind_workers``, or enough binds in flight to spend the client's QPS when a bind
    takes 200 ms on a busy API server (at least 8, at most 32: measured on one, 32 workers
    bound singles faster than 8 at 5,000 QPS). Derived, not a variable."""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """The Prometheus port of ``fluence up``."""

    port: int
    bind_address: str


@dataclass(frozen=True, slots=True)
class LeaderSettings:
    """Leader election of ``fluence up``'s replicas, through a Lease."""

    elect: bool
    lease_name: str
    lease_namespace: str | None
    lease_duration: float
    lease_renew: float


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """``fluence webhook``: its handlers, its two HTTPS ports, its identity and its loops."""

    handlers: tuple[str, ...]
    port: int
    report_port: int
    bind_address: str
    cert_dir: Path | None
    client_ca: Path | None
    service: str
    namespace: str
    config: str
    repair_interval: float
    podgroup_cleanup: float
    podgroup_grace: float


@dataclass(frozen=True, slots=True)
class HybridSettings:
    """The two-queue feature: the split's gate and image, the scouts' reports, the sweep.

    :meth:`pod_env` is what the webhook writes into a scout's containers: the settings
    they read, at this process's values.
    """

    runtime_image: str
    quantum_gate: str
    orphan_sweep: float
    report_url: str
    report_audience: str
    report_ca: str | None
    runtime_dir: Path
    session_hold_timeout: float
    sidecar_env: tuple[dict[str, str], ...]
    """:meth:`pod_env` of the sidecar, made once (derived, not a variable)."""
    scout_env: tuple[dict[str, str], ...]
    """:meth:`pod_env` of the scout's app containers (derived, not a variable)."""

    def pod_env(self, component: str) -> list[dict[str, str]]:
        """The env entries of the scout's ``component`` (``sidecar`` or ``scout``): every
        setting it reads at this process's value, but the per-pod and unset ones."""
        if component == SIDECAR:
            return [dict(entry) for entry in self.sidecar_env]
        if component == SCOUT:
            return [dict(entry) for entry in self.scout_env]
        raise ValueError(f"{component!r} does not run in the scout's pod ({POD_COMPONENTS})")


@dataclass(frozen=True, slots=True)
class SidecarSettings:
    """The scout's sidecar: how it polls the vendor, when it releases the workers."""

    poll_interval: float
    ungate_position: int
    find_task_timeout: float
    observe_only: bool
    worker_timeout: float
    report_token_file: Path


@dataclass(frozen=True, slots=True)
class PodSettings:
    """The pod this process runs in, from the downward API (the sidecar's)."""

    uid: str | None
    name: str | None
    namespace: str | None


PLACES: Final[dict[str, tuple[str, str]]] = {
    "resources": ("graph", "resources"),
    "match_policy": ("graph", "match_policy"),
    "topology_levels": ("graph", "topology_levels"),
    "memory_chunks_per_core": ("graph", "memory_chunks_per_core"),
    "kube_qps": ("kube", "qps"),
    "kube_burst": ("kube", "burst"),
    "preference_tiers": ("scheduling", "preference_tiers"),
    "pod_initial_backoff_seconds": ("scheduling", "pod_initial_backoff_seconds"),
    "pod_max_backoff_seconds": ("scheduling", "pod_max_backoff_seconds"),
    "reserve_after_seconds": ("scheduling", "reserve_after_seconds"),
    "reserve_depth": ("scheduling", "reserve_depth"),
    "arrival_report_seconds": ("scheduling", "arrival_report_seconds"),
    "cycle_budget_seconds": ("scheduling", "cycle_budget_seconds"),
    "percentage_of_nodes_to_score": ("scheduling", "percentage_of_nodes_to_score"),
    "bind_workers": ("scheduling", "bind_workers"),
    "watch_chunk": ("scheduling", "watch_chunk"),
    "backend_refresh": ("scheduling", "backend_refresh"),
    "metrics_port": ("metrics", "port"),
    "metrics_bind_address": ("metrics", "bind_address"),
    "leader_elect": ("leader", "elect"),
    "lease_name": ("leader", "lease_name"),
    "lease_namespace": ("leader", "lease_namespace"),
    "lease_duration": ("leader", "lease_duration"),
    "lease_renew": ("leader", "lease_renew"),
    "webhook_handlers": ("webhook", "handlers"),
    "webhook_port": ("webhook", "port"),
    "report_port": ("webhook", "report_port"),
    "webhook_bind_address": ("webhook", "bind_address"),
    "webhook_cert_dir": ("webhook", "cert_dir"),
    "webhook_client_ca": ("webhook", "client_ca"),
    "webhook_service": ("webhook", "service"),
    "webhook_namespace": ("webhook", "namespace"),
    "webhook_config": ("webhook", "config"),
    "webhook_repair_interval": ("webhook", "repair_interval"),
    "webhook_podgroup_cleanup": ("webhook", "podgroup_cleanup"),
    "webhook_podgroup_grace": ("webhook", "podgroup_grace"),
    "runtime_image": ("hybrid", "runtime_image"),
    "quantum_gate": ("hybrid", "quantum_gate"),
    "orphan_sweep": ("hybrid", "orphan_sweep"),
    "report_url": ("hybrid", "report_url"),
    "report_audience": ("hybrid", "report_audience"),
    "report_ca": ("hybrid", "report_ca"),
    "runtime_dir": ("hybrid", "runtime_dir"),
    "session_hold_timeout": ("hybrid", "session_hold_timeout"),
    "sidecar_poll_interval": ("sidecar", "poll_interval"),
    "ungate_position": ("sidecar", "ungate_position"),
    "find_task_timeout": ("sidecar", "find_task_timeout"),
    "observe_only": ("sidecar", "observe_only"),
    "worker_timeout": ("sidecar", "worker_timeout"),
    "report_token_file": ("sidecar", "report_token_file"),
    "pod_uid": ("pod", "uid"),
    "pod_name": ("pod", "name"),
    "pod_namespace": ("pod", "namespace"),
    "log_level": ("", "log_level"),
    "disable_plugins": ("", "disable_plugins"),
}
"""Variable (a :class:`SettingsVariables` field) -> (group, name) in :class:`Settings`; an
empty group is a top-level field. ``tests/test_settings.py`` holds every variable to one
place."""


@dataclass(frozen=True, slots=True, init=False)
class Settings:
    """Fluence's configuration, grouped by the feature that reads it.

    ``settings.webhook.port``, ``settings.scheduling.watch_chunk``,
    ``settings.hybrid.pod_env("sidecar")``: a reader names the feature first, so a
    setting's home says who uses it. The values come from :class:`SettingsVariables`
    (``FLUENCE_*`` variables; their names are the user's API and do not follow the
    groups). ``Settings(**variables)`` reads the environment with those overrides, named
    as :func:`load_settings` names them, and :meth:`replaced` copies with some changed.
    """

    variables: SettingsVariables
    """The variables as read: what ``fluence settings`` lists and :meth:`replaced` edits."""
    log_level: str
    disable_plugins: tuple[str, ...]
    graph: GraphSettings
    kube: KubeSettings
    scheduling: SchedulingSettings
    metrics: MetricsSettings
    leader: LeaderSettings
    webhook: WebhookSettings
    hybrid: HybridSettings
    sidecar: SidecarSettings
    pod: PodSettings

    def __init__(self, **variables: object) -> None:
        try:
            read = SettingsVariables(**variables)  # type: ignore[arg-type]
        except ValidationError as error:
            raise SettingsError(_describe(error, SettingsVariables)) from None
        self._fill(read)

    @classmethod
    def of(cls, variables: SettingsVariables) -> Settings:
        """The settings of variables already read and checked."""
        settings = object.__new__(cls)
        settings._fill(variables)
        return settings

    def replaced(self, **variables: object) -> Settings:
        """A copy with some variables changed (keywords as for :func:`load_settings`),
        checked again."""
        unknown = sorted(set(variables) - set(PLACES))
        if unknown:
            raise SettingsError(f"no such Fluence setting: {', '.join(unknown)}")
        values = {**self.variables.model_dump(), **variables}
        try:
            return Settings.of(SettingsVariables.model_validate(values))
        except ValidationError as error:
            raise SettingsError(_describe(error, SettingsVariables)) from None

    def _fill(self, variables: SettingsVariables) -> None:
        grouped: dict[str, dict[str, object]] = {group: {} for group, _ in PLACES.values()}
        for field, (group, name) in PLACES.items():
            grouped[group][name] = _frozen(getattr(variables, field))
        grouped["scheduling"]["bind_pool"] = (
            variables.bind_workers if variables.bind_workers is not None
            else min(32, max(8, math.ceil(variables.kube_qps * 0.2))))
        grouped["hybrid"]["sidecar_env"] = _pod_env(variables, SIDECAR)
        grouped["hybrid"]["scout_env"] = _pod_env(variables, SCOUT)
        top = grouped.pop("")
        values: dict[str, object] = {"variables": variables, **top}
        for group, kind in _GROUPS.items():
            values[group] = kind(**grouped[group])
        for name, value in values.items():
            object.__setattr__(self, name, value)


_GROUPS: Final[dict[str, type[Any]]] = {
    "graph": GraphSettings, "kube": KubeSettings, "scheduling": SchedulingSettings,
    "metrics": MetricsSettings, "leader": LeaderSettings, "webhook": WebhookSettings,
    "hybrid": HybridSettings, "sidecar": SidecarSettings, "pod": PodSettings,
}


def _frozen(value: object) -> object:
    """A list value as a tuple, so a group's fields cannot be changed in place."""
    return tuple(value) if isinstance(value, list) else value
