"""Which pods must reach the webhook: CEL conditions the handlers declare, joined once.

Calling a webhook costs the API server CPU even when the answer changes nothing
(encoding the review, TLS, HTTP), and any patch makes it run its own mutating admission
plugins again; on a busy control plane that is most of what Fluence's admission costs
(docs/admission-cost.md). So the API server should send only the pods Fluence would
change, refuse or act on: a webhook's ``matchConditions`` are CEL expressions over the
object, and a webhook is called only when all of them are true.

Each pod handler says which pods it must see in ``match_condition``; a ``fluence_admit``
implementation says so with :func:`judges`; the service's own refusals
(:func:`~fluence_core.webhook.pod_shape.shape_problem`) declare theirs beside them.
:func:`pod_match_conditions` turns those into the pod webhook's conditions: the scheduler
name, and one expression true when any of them is. One that declares nothing (``None``)
must see every pod: then the webhook is called for every Fluence pod.

A condition must be true for every pod its owner could change, refuse or act on: a pod
it wrongly excludes skips the webhook with whatever it carries, forged annotations
included. It may be wider than needed; that only costs a call. Expressions use only
standard CEL (``has``, ``in``, ``exists``, ``matches``), guard every optional field with
``has`` (an error follows the webhook's failurePolicy: refusal) and evaluate in the
``object`` variable the API server binds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from fluence_core import names
from fluence_core.errors import FluenceError

SCHEDULER_CONDITION = "scheduler-is-fluence"
"""The first condition: only pods that opted in to Fluence."""
NEEDS_CONDITION = "needs-fluence"
"""The second: some handler, admission check or refusal of the webhook's may act on the pod."""
JUDGES_ATTRIBUTE = "fluence_match_condition"
"""Where :func:`judges` keeps a ``fluence_admit`` implementation's condition."""

F = TypeVar("F", bound=Callable[..., Any])


def quoted(text: str) -> str:
    """``text`` as a CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _map_value(field: str, key: str) -> str:
    """The string under ``key`` of ``object.metadata.<field>``, '' when absent."""
    owner = f"object.metadata.{field}"
    return f"(has({owner}) && {quoted(key)} in {owner} ? {owner}[{quoted(key)}] : '')"


def label(key: str) -> str:
    """CEL for the pod's label ``key`` ('' when absent)."""
    return _map_value("labels", key)


def annotation(key: str) -> str:
    """CEL for the pod's annotation ``key`` ('' when absent)."""
    return _map_value("annotations", key)


def has_annotation(key: str) -> str:
    """CEL: the pod carries annotation ``key``, whatever its value (an empty one too)."""
    return f"(has(object.metadata.annotations) && {quoted(key)} in object.metadata.annotations)"


def any_of(*expressions: str) -> str:
    return "(" + " || ".join(expressions) + ")"


def all_of(*expressions: str) -> str:
    return "(" + " && ".join(expressions) + ")"


def _names_virtual(container: str) -> str:
    prefix = quoted(f"{names.RESOURCE_DOMAIN}/")
    sections = [
        f"(has({container}.resources.{part}) && "
        f"{container}.resources.{part}.exists(k, k.startsWith({prefix})))"
        for part in ("requests", "limits")
    ]
    return f"(has({container}.resources) && {any_of(*sections)})"


def asks_for_virtual() -> str:
    """CEL: a container or init container requests or limits a virtual resource
    (:func:`~fluence_core.webhook.pod_fields.asks_for_virtual`; any name under the prefix
    counts, a little wider)."""
    return any_of(*(f"(has(object.spec.{section}) && object.spec.{section}.exists(c, "
                    f"{_names_virtual('c')}))" for section in ("containers", "initContainers")))


def names_claims() -> str:
    """CEL: the pod names ResourceClaims (:func:`~fluence_core.webhook.pod_fields.names_claims`)."""
    return "(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0)"


def is_quantum() -> str:
    """CEL for :func:`~fluence_core.webhook.pod_fields.is_quantum_pod`: asks for a virtual
    resource, or is a split's scout or worker by its role label."""
    role = label(names.ROLE_LABEL)
    return any_of(asks_for_virtual(), f"{role} == {quoted(names.ROLE_SCOUT)}",
                  f"{role} == {quoted(names.ROLE_WORKER)}")


def scheduling_group() -> str:
    """CEL for the pod's ``spec.schedulingGroup.podGroupName`` ('' when absent)."""
    group = "object.spec.schedulingGroup"
    return (f"(has({group}) && has({group}.podGroupName) ? {group}.podGroupName : '')")


def controlled_by(kind: str) -> str:
    """CEL: an owner reference of ``kind`` says it is the pod's controller."""
    refs = "object.metadata.ownerReferences"
    return (f"(has({refs}) && {refs}.exists(r, has(r.kind) && r.kind == {quoted(kind)} && "
            f"has(r.controller) && r.controller == true))")


def positive_int(expression: str, limit: int) -> str:
    """CEL: the string ``expression`` is what
    :func:`~fluence_core.webhook.controller.pod_groups.positive_int_annotation` accepts
    (ASCII digits, at most ``limit``, not 0)."""
    digits = len(str(limit))
    return all_of(f"{expression}.matches('^[0-9]{{1,{digits}}}$')",
                  f"int({expression}) >= 1", f"int({expression}) <= {limit}")


@dataclass(frozen=True)
class Need:
    """Who must see which pods: ``condition`` None means every pod."""

    owner: str
    condition: str | None


def judges(condition: str) -> Callable[[F], F]:
    """Declare the pods a ``fluence_admit`` implementation may refuse or act on::

        @hookimpl
        @judges(conditions.is_quantum())
        def fluence_admit(pod, ctx): ...

    An implementation without it is taken to judge every pod.
    """
    if not isinstance(condition, str) or not condition.strip():
        raise FluenceError(f"judges: the condition must be a CEL expression, got {condition!r}")

    def mark(function: F) -> F:
        setattr(function, JUDGES_ATTRIBUTE, condition)
        return function
    return mark


def judged_by(function: Callable[..., Any]) -> str | None:
    """The condition :func:`judges` put on ``function``, None when it has none."""
    found = getattr(function, JUDGES_ATTRIBUTE, None)
    return found if isinstance(found, str) else None


def scheduler_condition() -> dict[str, str]:
    return {"name": SCHEDULER_CONDITION,
            "expression": f"object.spec.schedulerName == {quoted(names.SCHEDULER_NAME)}"}


def pod_match_conditions(needs: Iterable[Need]) -> list[dict[str, str]]:
    """The pod webhook's ``matchConditions``, from what each owner must see.

    Always the scheduler name; then, unless some owner must see every pod, one
    condition true when any owner's is (matchConditions are ANDed, so the
    owners' must be joined into one). A condition that is not a non-empty
    string is a :class:`FluenceError` naming its owner.
    """
    expressions: list[str] = []
    every = False
    for need in needs:
        if need.condition is None:
            every = True
            continue
        if not isinstance(need.condition, str) or not need.condition.strip():
            raise FluenceError(f"webhook: {need.owner}'s match_condition must be a CEL"
                               f" expression or None, got {need.condition!r}")
        expressions.append(f"({need.condition.strip()})")
    conditions = [scheduler_condition()]
    if not every and expressions:
        conditions.append({"name": NEEDS_CONDITION, "expression": " ||\n".join(expressions)})
    return conditions


def skipping(conditions: Sequence[Mapping[str, str]]) -> bool:
    """Whether ``conditions`` let the API server skip some Fluence pods."""
    return any(c.get("name") == NEEDS_CONDITION for c in conditions)
