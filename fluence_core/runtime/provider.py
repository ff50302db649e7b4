"""The provider interface: one vendor's interceptor half and sidecar half.

A provider is contributed through the ``fluence_providers`` hook (a third party
ships a distribution with a ``fluence`` entry point; nothing in the core
changes). The sidecar picks the provider whose :meth:`Provider.matches` accepts
the ``FLUXION_*`` attributes the scheduler chose for the scout.

The interceptor half must be importable in a user's container that has none of
Fluence's dependencies: :attr:`Provider.interceptor_module` names a *single,
self-contained* module (stdlib plus the vendor SDK, imported lazily) that
defines ``install_interceptor(pod_uid) -> bool``. ``fluence stage`` copies that
file verbatim; the same module serves :meth:`Provider.install_interceptor` in
process.
"""

from __future__ import annotations

import importlib
import json
import os
from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fluence_core import names
from fluence_core.errors import FluenceError
from fluence_core.log import logger
from fluence_core.settings import load_settings

BEYOND_REPORTED = 2001
"""The queue position used for a vendor's ``">2000"`` (Braket stops counting there)."""


@dataclass(frozen=True)
class Backend:
    """The backend the scheduler gave the scout: its name and every attribute."""

    name: str
    attributes: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_attributes(cls, attributes: Mapping[str, str]) -> "Backend":
        return cls(attributes.get("backend", ""), dict(attributes))


class Provider(Protocol):
    """One quantum vendor, as the interceptor and the sidecar see it.

    A provider subclasses this protocol: it must implement the abstract methods
    and inherits the defaults of the others. ``task`` objects are the provider's
    own; the sidecar only hands them back. Every sidecar method may raise on a
    transient vendor error; the sidecar logs it and tries again at the next poll.
    :mod:`fluence_core.runtime.conformance` checks a provider against this contract.
    """

    name: str = ""
    """Short name (``braket``, ``qrmi``): the staged interceptor's file name."""

    interceptor_module: str = ""
    """Dotted name of the self-contained interceptor module (see the module doc)."""

    interceptor_match: Mapping[str, str] = {}
    """Attributes the scout's backend must carry for ``fluence stage``'s boot to install
    this interceptor (every key it has must agree); empty installs it always."""

    # -- interceptor half -------------------------------------------------

    def install_interceptor(self, pod_uid: str) -> bool:
        """Patch the vendor SDK so every task carries ``fluence-pod-uid=<pod_uid>``
        (or is recorded where tags do not exist). Never raises; False when the
        SDK is absent or could not be patched."""
        try:
            module = importlib.import_module(self.interceptor_module)
            return bool(module.install_interceptor(pod_uid))
        except Exception as error:  # the user's program must run regardless
            logger.warning("interceptor %s not installed: %s", self.name, error)
            return False

    # -- sidecar half ----------------------------------------------------

    @abstractmethod
    def matches(self, attributes: Mapping[str, str]) -> bool:
        """Whether this provider serves a backend with these attributes (keys as
        in :func:`attributes_from_env`: ``provider``, ``backend``, ``region``...)."""

    @abstractmethod
    def find_my_task(self, pod_uid: str, backend: Backend, timeout: float) -> Any | None:
        """One attempt (bounded by ``timeout`` seconds of I/O) to find the task the
        pod submitted; None when it is not (yet) visible. The sidecar retries."""

    def refresh(self, task: Any) -> Any:
        """Fetch the task's current state once per poll; returns the task to use."""
        return task

    @abstractmethod
    def queue_position(self, task: Any) -> int | None:
        """Position in the vendor queue (1 = next), :data:`BEYOND_REPORTED` for
        ``">2000"``, None when not queued or not reported."""

    @abstractmethod
    def is_ready(self, task: Any, position: int) -> bool:
        """True when the task is at or under ``position`` in the queue, or already
        running or finished with a result: time to release the workers."""

    @abstractmethod
    def task_failed(self, task: Any) -> bool:
        """True when the task ended without a result (failed, cancelled)."""

    @abstractmethod
    def job_id(self, task: Any) -> str:
        """The id workers use to fetch the result (Braket: the task ARN)."""

    def session(self, task: Any) -> str | None:
        """The vendor session workers submit into, if the vendor has sessions."""
        return None

    def backend_info(self, backend: Backend) -> "BackendInfo | None":
        """Price, queue depth, status and qubits of ``backend`` for ``fluence select``,
        read with the *user's* credentials; None when the provider cannot say."""
        return None

    def describe(self, task: Any) -> str:
        """A short state for logs."""
        return self.job_id(task)


def parse_queue_position(raw: object) -> int | None:
    """A vendor's queue position as an int: ``"3"`` -> 3, ``">2000"`` -> 2001,
    ``None``/``"None"``/``""`` -> None."""
    if raw is None:
        return None
    if isinstance(raw, int):
        return raw
    text = str(raw).strip()
    if not text or text == "None":
        return None
    if text.startswith(">"):
        try:
            return int(text[1:]) + 1
        except ValueError:
            return BEYOND_REPORTED
    try:
        return int(text)
    except ValueError:
        return None


def attributes_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``FLUXION_BACKEND`` and every ``FLUXION_<ATTR>`` as ``{"backend": ..., "<attr>": ...}``
    (keys lower-cased; the webhook wrote them with non-alphanumerics as ``_``)."""
    environ = os.environ if environ is None else environ
    prefix = names.ENV_ATTR_PREFIX
    return {
        key[len(prefix):].lower(): value
        for key, value in environ.items()
        if key.startswith(prefix) and len(key) > len(prefix)
    }


def job_records(pod_uid: str, runtime_dir: Path | None = None) -> list[dict[str, Any]]:
    """What the pod's interceptor recorded of its jobs, oldest first: the lines of
    ``jobs.jsonl`` (:data:`~fluence_core.names.JOB_RECORD_FILE`) in ``runtime_dir`` (by
    default the ``FLUENCE_RUNTIME_DIR`` setting) whose ``pod_uid`` is ``pod_uid``.

    The interceptor appends a line per job while the sidecar reads, so a last line not yet
    whole is skipped (it is read whole at the next poll); no file yet means no job yet.
    """
    if runtime_dir is None:
        runtime_dir = load_settings().hybrid.runtime_dir
    try:
        lines = (runtime_dir / names.JOB_RECORD_FILE).read_text().splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line being written
        if isinstance(entry, dict) and entry.get("pod_uid") == pod_uid:
            found.append(entry)
    return found


def normalise_key(key: str) -> str:
    """An attribute key as it reads back from the environment (``qrmi-type`` -> ``qrmi_type``)."""
    return names.env_name_for_attribute(key)[len(names.ENV_ATTR_PREFIX):].lower()


def collect_providers(manager: Any) -> list[Provider]:
    """Every provider the plugins contribute, in plugin order."""
    found: list[Provider] = []
    for contributed in manager.hook.fluence_providers():
        for provider in contributed or ():
            found.append(provider)
    return found


def resolve_provider(attributes: Mapping[str, str], providers: Iterable[Provider]) -> Provider:
    """The first provider that matches the attributes; a FluenceError names what is installed."""
    providers = list(providers)
    for provider in providers:
        if provider.matches(attributes):
            return provider
    available = ", ".join(p.name for p in providers) or "none installed"
    shown = (
        ", ".join(f"{k}={v}" for k, v in sorted(attributes.items())) or "no FLUXION_* attributes"
    )
    raise FluenceError(f"no provider serves {shown} (providers: {available})")


@dataclass(frozen=True)
class BackendInfo:
    """What a provider reports about a backend for ``fluence select`` (None = unknown).

    ``price_per_shot``/``price_per_task`` are in USD; ``queue`` is the number of
    tasks waiting; ``status`` is ``online`` when the backend takes work.
    """

    name: str
    price_per_shot: float | None = None
    price_per_task: float | None = None
    queue: int | None = None
    status: str | None = None
    qubits: int | None = None
    source: str = ""

    def cost(self, shots: int) -> float | None:
        """The estimated price of one task of ``shots`` shots."""
        if self.price_per_shot is None and self.price_per_task is None:
            return None
        return (self.price_per_task or 0.0) + shots * (self.price_per_shot or 0.0)

    def merged_over(self, fallback: "BackendInfo") -> "BackendInfo":
        """This info with its unknowns filled from ``fallback``."""
        values = {k: getattr(self, k) if getattr(self, k) is not None else getattr(fallback, k)
                  for k in ("price_per_shot", "price_per_task", "queue", "status", "qubits")}
        sources = "+".join(s for s in (self.source, fallback.source) if s)
        return BackendInfo(self.name, source=sources, **values)
