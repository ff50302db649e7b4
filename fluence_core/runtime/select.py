"""``fluence select``: choose a backend by policy, in user space, and pin it on a manifest.

Fluxion's constraints can say "a backend with attribute X"; they cannot say "the
cheapest" or "queue under 10". This runs in user space: it takes each backend's price,
queue depth, status and qubits from the providers (with the user's own credentials),
from a file, or from the ConfigMap the scheduler refreshes
(:mod:`fluence_core.runtime.figures`), ranks the backends of one type in the resources
config by a :class:`Policy`, and writes the winner onto a Pod or pod template as
``fluence.flux-framework.org/require-backend`` with a JSON record of why.

Pins come first: every ``fluence.flux-framework.org/require-<attr>`` already on the pod
template (``provider: qrmi``, ``region: us-east-1``...) is a constraint the scheduler
will apply, so a backend that breaks one is excluded before the policy is asked, exactly
as the graph would exclude it (the pin must hold on a vertex of the asked type in that
backend's tree; ``require-backend`` names the backend itself).
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
from fluence_core.runtime import figures
from fluence_core.runtime.provider import Backend, BackendInfo, Provider, normalise_key
from fluence_core.kube.meta import annotations_of, metadata_of

RANKINGS = ("min-cost", "min-queue", "max-qubits")
FLAGS = ("online-only",)
THRESHOLDS = ("max-cost", "max-queue", "min-qubits")
ONLINE = "online"


@dataclass(frozen=True)
class Policy:
    """How to rank backends. Policy terms (comma-separated, applied in order):

    * rankings: ``min-cost``, ``min-queue``, ``max-qubits`` (first term ranks
      first; ties go to the next term, then to the name)
    * filters: ``online-only``, ``max-cost=<usd>``, ``max-queue=<n>``, ``min-qubits=<n>``

    Cost is the estimated price of one task of ``shots`` shots (per-task price +
    shots x per-shot price). A backend whose value a filter needs is unknown is
    excluded, with the reason in the record.
    """

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
            parts = [f"{term} {_shown(_key_value(chosen, term))}" for term in self.policy.rankings]
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


def _shown(value: Any) -> str:
    """A ranking figure as ``fluence select`` says it: a figure nobody knows is "unknown"."""
    return "unknown" if value is None else str(value)


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


def backend_of(resource: VirtualResource) -> tuple[Backend, BackendInfo]:
    """A top-level resource as a backend, with what the config itself says of it (qubits
    from ``qubit`` children; ``price-per-shot``/``price-per-task`` attributes)."""
    attrs = {normalise_key(k): v for k, v in resource.attributes.items()}
    attrs["backend"] = resource.name
    info = BackendInfo(
        resource.name,
        price_per_shot=_float(attrs.get("price_per_shot")),
        price_per_task=_float(attrs.get("price_per_task")),
        qubits=_qubits_in(resource) or None,
        source="config",
    )
    return Backend(resource.name, attrs), info


def backends_of_type(
    config: ResourceConfig, resource_type: str
) -> list[tuple[Backend, BackendInfo]]:
    """Each top-level resource that serves ``resource_type`` (see :func:`backend_of`)."""
    return [backend_of(r) for r in config.resources if resource_type in r.types()]


def load_price_fixture(path: Path) -> dict[str, BackendInfo]:
    """A file of backend figures (the schema of :mod:`fluence_core.runtime.figures`)."""
    return figures.load_file(path)


Pins = Mapping[str, str]
"""``require-<attr>`` pins by attribute (``{"provider": "qrmi"}``)."""


def pins_of(annotations: Mapping[str, Any]) -> dict[str, str]:
    """The ``require-*`` pins among a pod's annotations, as the scheduler reads them."""
    prefix = names.REQUIRE_ANNOTATION_PREFIX
    return {
        str(key)[len(prefix):]: str(value)
        for key, value in annotations.items()
        if str(key).startswith(prefix) and len(str(key)) > len(prefix)
    }


def parse_pins(terms: Iterable[str]) -> dict[str, str]:
    """``--require attr=value`` terms as pins; a term without ``=`` is named."""
    pins = {}
    for term in terms:
        key, sep, value = term.partition("=")
        if not sep or not key.strip():
            raise FluenceError(f"--require {term!r}: expected ATTRIBUTE=VALUE")
        pins[key.strip()] = value.strip()
    return pins


def _serving(resource: VirtualResource, resource_type: str) -> Iterable[VirtualResource]:
    """The entries of ``resource``'s tree that are (or hold) a vertex of ``resource_type``."""
    if resource_type in resource.types():
        yield resource
        for child in resource.children:
            yield from _serving(child, resource_type)


def pin_conflict(resource: VirtualResource, resource_type: str, pins: Pins) -> str | None:
    """Why no vertex of ``resource_type`` in this backend's tree carries every pin, or None.

    The graph gives each vertex its (inherited) attributes plus ``backend=<top name>``,
    and a pinned jobspec asks one vertex of the type to carry them all."""
    if not pins:
        return None
    first: str | None = None
    for entry in _serving(resource, resource_type):
        carried = {**entry.attributes, "backend": resource.name}
        broken = [(k, v) for k, v in sorted(pins.items()) if carried.get(k) != v]
        if not broken:
            return None
        if first is None:  # the outermost vertex's first broken pin says it best
            key, wanted = broken[0]
            first = f"require-{key}={wanted}: {key} is {carried.get(key, 'unset')}"
    return first or f"serves no {resource_type}"


def pinned_out(config: ResourceConfig, resource_type: str, pins: Pins) -> dict[str, str]:
    """Backends of ``resource_type`` that break a pin, with the first pin each breaks."""
    found = {}
    for resource in config.resources:
        if resource_type in resource.types():
            reason = pin_conflict(resource, resource_type, pins)
            if reason is not None:
                found[resource.name] = reason
    return found


def gather(
    config: ResourceConfig,
    resource_type: str,
    providers: Sequence[Provider],
    fixture: Mapping[str, BackendInfo] | None = None,
    warn: Callable[[str], None] = lambda message: None,
    skip: Iterable[str] = (),
) -> list[tuple[Backend, BackendInfo]]:
    """Each backend with the best figures available: fixture, else provider, else config.
    Providers are not asked about the backends in ``skip`` (those a pin rules out)."""
    result = []
    skipped = set(skip)
    for backend, from_config in backends_of_type(config, resource_type):
        info = from_config
        reported = None
        if fixture is not None:
            reported = fixture.get(backend.name)
        elif backend.name not in skipped:
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
    pinned: Mapping[str, str] | None = None,
) -> Selection:
    """Drop the backends a pin rules out (``pinned``: name -> why, see :func:`pinned_out`),
    apply the policy's filters, then its rankings; the first eligible one wins."""
    ranked = []
    for backend, info in candidates:
        candidate = Candidate(backend, info, info.cost(shots))
        candidate.excluded = (pinned or {}).get(backend.name) or _exclusion(candidate, policy)
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


def _template_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The Pod itself, or the pod template of a PodTemplate, a CronJob or anything with
    ``spec.template`` (Job, Deployment...); None for objects that carry none."""
    kind = obj.get("kind", "")
    path = _TEMPLATE_PATHS.get(kind)
    if path is None:
        if not isinstance((obj.get("spec") or {}).get("template"), dict):
            return None
        path = ("spec", "template")
    target = obj
    for step in path:
        target = target.setdefault(step, {})
        if not isinstance(target, dict):
            return None
    return target


def template_pins(template: Mapping[str, Any]) -> dict[str, str]:
    """The pins a pod template already carries."""
    annotations = annotations_of(template)
    return pins_of(annotations) if isinstance(annotations, dict) else {}


def annotate_manifest(obj: dict[str, Any], selection: Selection) -> bool:
    """Write the choice onto the object's pod template (see :func:`_template_of`);
    returns False for objects that carry no pod template."""
    if selection.chosen is None:
        raise FluenceError("nothing to write: no backend passes the policy")
    target = _template_of(obj)
    if target is None:
        return False
    annotations = target.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[names.REQUIRE_BACKEND_ANNOTATION] = selection.chosen.backend.name
    annotations[names.SELECTION_ANNOTATION] = json.dumps(
        selection.record(), sort_keys=True, separators=(",", ":")
    )
    return True


def select_into_manifest(text: str, choose: Callable[[Pins], Selection]) -> str:
    """Every document of a manifest with a choice written where it applies; each pod
    template's own pins go to ``choose``, so no choice breaks a pin already there."""
    try:
        documents = [d for d in yamlfile.load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise FluenceError(f"the manifest is not valid YAML: {error}") from None
    touched = 0
    for number, document in enumerate(documents, 1):
        template = _template_of(document) if isinstance(document, dict) else None
        if template is None:
            continue
        pins = template_pins(template)
        selection = choose(pins)
        if selection.chosen is None:
            shown = ", ".join(f"require-{k}={v}" for k, v in sorted(pins.items()))
            raise FluenceError(
                f"document {number} ({document.get('kind', '?')} "
                f"{metadata_of(document).get('name', '?')}): no backend passes "
                f"the policy{' with its pins ' + shown if shown else ''}"
            )
        touched += annotate_manifest(document, selection)
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
    "pins_of",
    "parse_pins",
    "pin_conflict",
    "pinned_out",
    "template_pins",
]
