"""From an AdmissionReview in to an AdmissionReview out; never raises.

The HTTP layer hands :meth:`AdmissionService.review` the raw body and sends
back whatever it returns. Everything that can go wrong — a body that is not
JSON, a review of the wrong version, a handler that raises, a side effect the
API server refuses — becomes a response with a message, so the API server
always gets an answer it can show the user.
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import orjson

from fluence_core import names
from fluence_core.kube.api import ClusterAPI
from fluence_core.kube.meta import writable_metadata
from fluence_core.log import logger
from fluence_core.resource_config import ResourceConfig
from fluence_core.settings import Settings
from fluence_core.webhook import pod_fields
from fluence_core.webhook import pod_shape
from fluence_core.webhook.admission import owned
from fluence_core.kube.patch import JsonPatch, apply_patch
from fluence_core.webhook.cel import Need, any_of, pod_match_conditions
from fluence_core.webhook.controller.informer import Watched
from fluence_core.webhook.admission.base import (
    POD_RESOURCE,
    AdmissionContext,
    AdmissionDenied,
    Handler,
    ServiceState,
    recent_of,
    resource_key,
    resources_of,
)
from fluence_core.webhook.controller.controller import Controller, Reconciler
from fluence_core.webhook.transport.routes import Reply
from fluence_core.webhook.controller.writer import BackgroundWriter

API_VERSION = "admission.k8s.io/v1"
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
KIND = "AdmissionReview"

AdmitHook = Callable[[Mapping[str, Any], AdmissionContext], "str | None"]
"""``fluence_admit`` as the service calls it: the pod and the request's context."""


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data, through orjson: ``copy.deepcopy`` was a third of a review's
    CPU (its memo serves object graphs JSON cannot hold), and the standard library's codec
    still took 0.2 ms for a pod, 18 times orjson's time."""
    return orjson.loads(orjson.dumps(value))


class BadReview(Exception):
    """The body is not an AdmissionReview request we can answer normally."""


@dataclass
class Outcome:
    """The HTTP status and the AdmissionReview to send back."""

    status: int
    body: dict[str, Any]

    @property
    def response(self) -> dict[str, Any]:
        response: dict[str, Any] = self.body["response"]
        return response


def _review(uid: str, response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": {"uid": uid, **response}}


def deny(uid: str, message: str, code: int = 403, warnings: Sequence[str] = ()) -> dict[str, Any]:
    response: dict[str, Any] = {
        "allowed": False,
        "status": {
            "code": code,
            "message": message,
            "reason": "Forbidden" if code == 403 else "BadRequest",
        },
    }
    if warnings:
        response["warnings"] = list(warnings)
    return _review(uid, response)


def allow(uid: str, patch: JsonPatch | None = None, warnings: Sequence[str] = ()) -> dict[str, Any]:
    response: dict[str, Any] = {"allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return _review(uid, response)


def _parse(body: bytes) -> dict[str, Any]:
    try:
        review = orjson.loads(body)  # strict RFC 8259: no NaN, UTF-8 only, depth <= 1024
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise BadReview(f"body is not JSON: {error}") from None
    if not isinstance(review, dict):
        raise BadReview("body is not a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        raise BadReview(f"expected {KIND} {API_VERSION}, got {review.get('kind')!r} "
                        f"{review.get('apiVersion')!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview request has no uid")
    if request.get("dryRun") is not None and not isinstance(request["dryRun"], bool):
        raise BadReview(f"request.dryRun must be true or false, got {request['dryRun']!r:.40}")
    return request


class AdmissionService:
    """Runs admission control and the ordered handlers for one AdmissionReview.

    ``clock`` and :attr:`state` reach every request's context: plugins age what
    they remember by the host's clock and keep it in the service's state. With a
    ``writer``, side effects deferred with a ``background`` key are made after the
    answer (``fluence webhook``); without one, on the request path (``fluence
    sim``, whose virtual time has no room for threads, and unit tests).
    ``admit_needs`` are the pods ``admit`` may refuse or act on (one per
    ``fluence_admit`` implementation); without them, every pod. ``watched``: the
    informers handlers look objects up in (:mod:`~fluence_core.webhook.controller.informer`; none:
    they read).
    """

    def __init__(self, settings: Settings, handlers: Sequence[Handler], *,
                 cluster: ClusterAPI | None = None, admit: AdmitHook | None = None,
                 resource_config: ResourceConfig | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 writer: BackgroundWriter | None = None,
                 admit_needs: Sequence[Need] | None = None,
                 watched: Watched | None = None, plugins_off: Sequence[object] = ()) -> None:
        self.settings = settings
        self.plugins_off = list(plugins_off)
        """Plugins whose every handler ``FLUENCE_WEBHOOK_HANDLERS`` leaves out: the webhook
        asks them for no routes and no loops (:func:`~fluence_core.webhook.plugins_left_out`)."""
        self.watched = watched or Watched()
        self.writer = writer
        self.handlers = list(handlers)
        self.cluster = cluster
        self.admit = admit
        if admit is None:
            admit_needs = ()
        self.admit_needs = (list(admit_needs) if admit_needs is not None
                            else [Need("fluence_admit", None)])
        self.resource_config = resource_config or ResourceConfig()
        self.clock = clock
        self.state = ServiceState()
        self.controller = Controller(
            settings, cluster, self.watched, recent_of(self.state, clock), writer,
            [h for h in self.handlers if isinstance(h, Reconciler)], clock)
        """Makes what stored objects need (:mod:`~fluence_core.webhook.controller.controller`):
        admission makes nothing."""

    def needs(self) -> list[Need]:
        """Which pods each part of a pod review may change, refuse or act on: the review's
        own checks, admission control, then each pod handler in order."""
        checks = any_of(pod_shape.shape_condition(), owned.condition())
        return [Need("the webhook's pod checks", checks), *self.admit_needs,
                *(Need(f"handler {h.name}", getattr(h, "match_condition", None))
                  for h in self.handlers if POD_RESOURCE in resources_of(h))]

    @property
    def match_conditions(self) -> list[dict[str, str]]:
        """The pod webhook's ``matchConditions``: Fluence pods that something here needs
        (:func:`~fluence_core.webhook.cel.pod_match_conditions`)."""
        return pod_match_conditions(self.needs())

    def _context(self, namespace: str, request: Mapping[str, Any], uid: str) -> AdmissionContext:
        return AdmissionContext(
            settings=self.settings, cluster=self.cluster, namespace=namespace,
            dry_run=request.get("dryRun") is True, resource_config=self.resource_config, uid=uid,
            clock=self.clock, state=self.state,
            writing=self.writer.holds if self.writer is not None else lambda key: False,
            watched=self.watched,
        )

    def review(self, body: bytes) -> Outcome:
        """The answer to one request body; never raises."""
        try:
            request = _parse(body)
        except BadReview as error:
            return Outcome(400, deny("", f"fluence webhook: {error}", code=400))
        uid = request["uid"]
        try:
            return Outcome(200, self._review(uid, request))
        except Exception as error:  # the last line: an answer, never a 500 or a hang
            logger.exception("webhook: unexpected failure on request %s", uid)
            return Outcome(200, deny(uid, f"fluence webhook: internal error: {error}", code=500))

    def _review(self, uid: str, request: dict[str, Any]) -> dict[str, Any]:
        resource = request.get("resource") or {}
        if (request.get("operation") != "CREATE" or request.get("subResource")
                or not isinstance(resource, dict)):
            return allow(uid)  # not ours to judge: the configuration should not even send it
        key = resource_key(str(resource.get("group") or ""), str(resource.get("resource") or ""))
        namespace = request.get("namespace")
        if namespace == names.KUBE_SYSTEM:
            return allow(uid)
        if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
            # Every kind Fluence handles is namespaced, and the API server always names the
            # namespace: the object's own metadata is never trusted to say where to act.
            return deny(uid, f"fluence webhook: request.namespace {str(namespace)[:80]!r} is not"
                             " a namespace name", code=400)
        if key != POD_RESOURCE:
            return self._review_object(uid, request, key, namespace)
        pod = request.get("object")
        if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod" or not isinstance(
                pod.get("spec"), dict):
            return deny(uid, "fluence webhook: the request carries no Pod object", code=400)
        if not pod_fields.is_fluence_pod(pod):
            return allow(uid)
        problem = pod_shape.shape_problem(pod)
        if problem is not None:
            return deny(uid, f"fluence webhook: {problem}", code=400)
        pod = json_copy(pod)
        # Fluence's records are Fluence's, never a user's; a seal stays only if it is ours
        stripped = owned.removing_scheduler_only(pod, owned.sealer_of(self.state), namespace)
        apply_patch(pod, json_copy(stripped))
        metadata = writable_metadata(pod)
        metadata["namespace"] = namespace
        ctx = self._context(namespace, request, uid)
        if self.admit is not None:
            try:
                refusal = self.admit(pod, ctx)
            except Exception as error:
                logger.exception("webhook: admission control raised")
                return deny(uid, f"fluence admission control failed: {error}")
            if refusal:
                return deny(uid, str(refusal), warnings=ctx.warnings)
        return self._run(
            uid, pod, ctx, [h for h in self.handlers if POD_RESOURCE in resources_of(h)],
            stripped)

    def _review_object(self, uid: str, request: dict[str, Any], key: str,
                       namespace: str) -> dict[str, Any]:
        """A kind other than Pod: only the handlers that declare it; no pod admission control."""
        handlers = [h for h in self.handlers if key in resources_of(h)]
        if not handlers:
            return allow(uid)  # no handler asked for this kind
        obj = request.get("object")
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            return deny(uid, f"fluence webhook: the request carries no {key} object", code=400)
        obj = json_copy(obj)
        metadata = writable_metadata(obj)
        metadata["namespace"] = namespace
        ctx = self._context(namespace, request, uid)
        return self._run(uid, obj, ctx, handlers)

    def _run(self, uid: str, obj: dict[str, Any], ctx: AdmissionContext,
             handlers: Sequence[Handler], first: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """Each handler in turn on the working copy (``first`` applied to it already): a patch
        or a refusal, nothing else."""
        patch: JsonPatch = list(first)
        for handler in handlers:
            ctx.current_handler = handler.name
            try:
                if not handler.applies(obj):
                    continue
                ops = list(handler.mutate(obj, ctx))
                apply_patch(obj, json_copy(ops))
            except AdmissionDenied as error:
                return deny(
                    uid, f"fluence webhook handler {handler.name}: {error}", warnings=ctx.warnings
                )
            except Exception as error:
                logger.exception(
                    "webhook: handler %s raised on %s", handler.name, pod_fields.pod_label(obj)
                )
                return deny(
                    uid,
                    f"fluence webhook handler {handler.name} failed: "
                    f"{type(error).__name__}: {error}",
                    warnings=ctx.warnings,
                )
            patch += ops
        if patch:
            logger.debug("webhook: %s patched by %d ops", pod_fields.pod_label(obj), len(patch))
        return allow(uid, patch, ctx.warnings)


MAX_REVIEW = 4 * 1024 * 1024
"""Bytes a review may have: it carries one object (etcd caps objects at 1.5 MiB)."""


class AdmissionEndpoint:
    """The admission port's :class:`~fluence_core.webhook.transport.routes.Endpoint`: every POST,
    whatever its path (``/mutate``, ``/mutate-jobs``...), is a review for ``service``, and
    every error, the server's own included, an AdmissionReview that denies."""

    def __init__(self, service: AdmissionService, *, max_body: int = MAX_REVIEW) -> None:
        self.service = service
        self.max_body = max_body

    def limit(self, path: str) -> int | None:
        return self.max_body

    def post(self, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        outcome = self.service.review(body)
        return Reply(outcome.status, outcome.body)

    def error(self, path: str, status: int, message: str) -> dict[str, Any]:
        return deny("", f"fluence webhook: {message}", code=status)
