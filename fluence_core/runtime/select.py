"""``fluence select``: choose a backend by policy, in user space, and pin it on a manifest.

Fluxion's constraints can say "a backend with attribute X"; they cannot say
"the cheapest" or "queue under 10". This runs with the *user's* credentials
(never the scheduler's): it asks each backend's provider for price, queue
depth, status and qubits, ranks the backends of one type in the resources
config by a policy, and writes the winner onto a Pod or pod template as
``fluence.flux-framework.org/require-backend`` with a JSON record of why.

Policy terms (comma-separated, applied in order):

* rankings: ``min-cost``, ``min-queue``, ``max-qubits`` (first term ranks
  first; ties go to the next term, then to the name)
* filters: ``online-only``, ``max-cost=<usd>``, ``max-queue=<n>``, ``min-qubits=<n>``

Cost is the estimated price of one task of ``shots`` shots (per-task price +
shots x per-shot price). A backend whose value a filter needs is unknown is
excluded, with the reason in the record.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fluence_core import names, yamlfile
from fluence_core.errors import FluenceError
from fluence_core.resource_config import ResourceConfig, VirtualResource
from fluence_core.runtime.provider import Backend, BackendInfo, Provider, normalise_key

RANKINGS = ("min-cost", "min-queue", "max-qubits")
FLAGS = ("online-only",)
THRESHOLDS = ("max-cost", "max-queue", "min-qubits")
ONLINE = "online"


@dataclass(frozen=True)
class Policy:
    rankings: tuple[str, ...] = ("min-cost",)
    online_only: bool = False
    thresholds: Mapping[str, float] = field(default_factory=dict)
    text: str = "min-cost"

    @classmethod
    def parse(cls, text: str) -> "Policy":
        rankings: list[str] = []
        thresholds: dict[str, float] = {}
        online = False
        for term in (t.strip() for t in text.split(",")):
            if not term:
                continue
            if term in RANKINGS:
                rankings.append(term)
            elif term in FLAGS:
                online = True
            elif "=" in term and term.split("=", 1)[0] in THRESHOLDS:
                key, value = term.split("=", 1)
                try:
                    thresholds[key] = float(value)
                except ValueError:
                    raise FluenceError(f"policy term {term!r}: {value!r} is not a number") from None
            else:
                known = ", ".join(RANKINGS + FLAGS + tuple(f"{t}=<n>" for t in THRESHOLDS))
                raise FluenceError(f"unknown policy term {term!r} (known: {known})")
        return cls(tuple(rankings) or ("min-cost",), online, thresholds, text)


@dataclass
class Candidate:
    backend: Backend
    info: BackendInfo
    cost: float | None
    excluded: str | None = None

    def record(self) -> dict[str, Any]:
        return {
            "backend": self.backend.name,
            "cost": self.cost,
            "queue": self.info.queue,
            "status": self.info.status,
            "qubits": self.info.qubits,
            "source": self.info.source,
            "excluded": self.excluded,
        }


@dataclass
class Selection:
    chosen: Candidate | None
    ranked: list[Candidate]
    policy: Policy
    resource_type: str
    shots: int

    def record(self) -> dict[str, Any]:
        chosen = self.chosen
        if chosen is None:
            why = "no backend passes the policy"
        else:
            parts = [f"{term} {_key_value(chosen, term)}" for term in self.policy.rankings]
            eligible = sum(c.excluded is None for c in self.ranked)
            why = f"best by {', '.join(parts)} among {eligible} eligible"
        return {
            "type": self.resource_type,
            "policy": self.policy.text,
            "shots": self.shots,
            "chosen": chosen.backend.name if chosen else None,
            "why": why,
            "candidates": [c.record() for c in self.ranked],
        }


def _key_value(candidate: Candidate, term: str) -> Any:
    return {
        "min-cost": candidate.cost,
        "min-queue": candidate.info.queue,
        "max-qubits": candidate.info.qubits,
    }[term]


def _qubits_in(resource: VirtualResource) -> int:
    total = 0
    for child in resource.children:
        total += child.count if child.type == "qubit" else child.count * _qubits_in(child)
    return total


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def backends_of_type(
    config: ResourceConfig, resource_type: str
) -> list[tuple[Backend, BackendInfo]]:
    """Each top-level resource that serves ``resource_type``, with what the config itself says
    (qubits from ``qubit`` children; ``price-per-shot``/``price-per-task`` attributes)."""
    found = []
    for resource in config.resources:
        if resource_type not in resource.types():
            continue
        attrs = {normalise_key(k): v for k, v in resource.attributes.items()}
        attrs["backend"] = resource.name
        backend = Backend(resource.name, attrs)
        qubits = _qubits_in(resource) or None
        info = BackendInfo(
            resource.name,
            price_per_shot=_float(attrs.get("price_per_shot")),
            price_per_task=_float(attrs.get("price_per_task")),
            qubits=qubits,
            source="config",
        )
        found.append((backend, info))
    return found


def load_price_fixture(path: Path) -> dict[str, BackendInfo]:
    """A YAML/JSON mapping ``backend -> {price_per_shot, price_per_task, queue, status,
    qubits}``."""
    try:
        data = yamlfile.load(yamlfile.read_text(path)) or {}
    except yaml.YAMLError as error:
        raise FluenceError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise FluenceError(f"{path}: expected a mapping of backend name to its figures")
    infos = {}
    for name, figures in data.items():
        figures = dict(figures or {})
        allowed = {"price_per_shot", "price_per_task", "queue", "status", "qubits"}
        unknown = set(figures) - allowed
        if unknown:
            raise FluenceError(
                f"{path}: {name}: unknown keys {sorted(unknown)} (allowed: {sorted(allowed)})"
            )
        infos[str(name)] = BackendInfo(str(name), source=str(path), **figures)
    return infos


def gather(
    config: ResourceConfig,
    resource_type: str,
    providers: Sequence[Provider],
    fixture: Mapping[str, BackendInfo] | None = None,
    warn: Callable[[str], None] = lambda message: None,
) -> list[tuple[Backend, BackendInfo]]:
    """Each backend with the best figures available: fixture, else provider, else config."""
    result = []
    for backend, from_config in backends_of_type(config, resource_type):
        info = from_config
        reported = None
        if fixture is not None:
            reported = fixture.get(backend.name)
        else:
            provider = next((p for p in providers if p.matches(backend.attributes)), None)
            if provider is not None:
                try:
                    reported = provider.backend_info(backend)
                except Exception as error:  # one vendor's outage must not stop the choice
                    warn(f"{backend.name}: {provider.name} could not report: {error}")
        if reported is not None:
            info = reported.merged_over(from_config)
        result.append((backend, info))
    return result


def rank(
    candidates: Iterable[tuple[Backend, BackendInfo]],
    policy: Policy,
    shots: int,
    resource_type: str = "",
) -> Selection:
    """Apply the policy's filters, then its rankings; the first eligible one wins."""
    ranked = []
    for backend, info in candidates:
        candidate = Candidate(backend, info, info.cost(shots))
        candidate.excluded = _exclusion(candidate, policy)
        ranked.append(candidate)

    def key(candidate: Candidate) -> tuple[Any, ...]:
        parts: list[Any] = [candidate.excluded is not None]
        for term in policy.rankings:
            value = _key_value(candidate, term)
            if value is None:
                parts.append((1, 0.0))  # unknown ranks last
            else:
                parts.append((0, -value if term.startswith("max-") else value))
        parts.append(candidate.backend.name)
        return tuple(parts)

    ranked.sort(key=key)
    chosen = ranked[0] if ranked and ranked[0].excluded is None else None
    return Selection(chosen, ranked, policy, resource_type, shots)


def _exclusion(candidate: Candidate, policy: Policy) -> str | None:
    info = candidate.info
    if policy.online_only and (info.status or "").lower() != ONLINE:
        return f"status {info.status or 'unknown'} is not online"
    checks: dict[str, tuple[float | None, Callable[[float, float], bool]]] = {
        "max-cost": (candidate.cost, operator.le),
        "max-queue": (info.queue, operator.le),
        "min-qubits": (info.qubits, operator.ge),
    }
    for term, limit in policy.thresholds.items():
        value, ok = checks[term]
        if value is None:
            return f"{term}={limit:g}: value unknown"
        if not ok(value, limit):
            return f"{term}={limit:g}: {value:g}"
    return None


_TEMPLATE_PATHS = {
    "Pod": (),
    "PodTemplate": ("template",),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def annotate_manifest(obj: dict[str, Any], selection: Selection) -> bool:
    """Write the choice onto a Pod, a PodTemplate, a CronJob or anything with
    ``spec.template`` (Job, Deployment, JobSet's replicated jobs are left alone);
    returns False for objects that carry no pod template."""
    if selection.chosen is None:
        raise FluenceError("nothing to write: no backend passes the policy")
    kind = obj.get("kind", "")
    path = _TEMPLATE_PATHS.get(kind)
    if path is None:
        if not isinstance((obj.get("spec") or {}).get("template"), dict):
            return False
        path = ("spec", "template")
    target = obj
    for step in path:
        target = target.setdefault(step, {})
    annotations = target.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[names.REQUIRE_BACKEND_ANNOTATION] = selection.chosen.backend.name
    annotations[names.SELECTION_ANNOTATION] = json.dumps(
        selection.record(), sort_keys=True, separators=(",", ":")
    )
    return True


def select_into_manifest(text: str, selection: Selection) -> str:
    """Every document of a manifest with the choice written where it applies."""
    try:
        documents = [d for d in yamlfile.load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise FluenceError(f"the manifest is not valid YAML: {error}") from None
    touched = sum(annotate_manifest(d, selection) for d in documents if isinstance(d, dict))
    if not touched:
        raise FluenceError("the manifest has no Pod or pod template to write the choice on")
    rendered: str = yaml.safe_dump_all(documents, sort_keys=False)
    return rendered


def as_json(selection: Selection) -> str:
    return json.dumps(selection.record(), indent=2)


__all__ = [
    "Policy",
    "Selection",
    "Candidate",
    "gather",
    "rank",
    "annotate_manifest",
    "select_into_manifest",
    "load_price_fixture",
    "backends_of_type",
]
