"""The scout's report endpoint: ``POST /v1/scout-report`` on the webhook's report port.

A :class:`~fluence_core.webhook.transport.routes.Route` the quantum handler's plugin
contributes (``fluence_webhook_routes``): served on ``FLUENCE_REPORT_PORT``, never on the
admission port, and not at all when that plugin is disabled.

The scout's sidecar holds no Kubernetes rights. It tells Fluence what it saw (task found;
release the workers; final status) and Fluence acts with its own, narrow rights. Why
each report is checked before anything is done: the port is reachable by any pod, so a
report is trusted only when a token the API server vouches for binds it to a live scout
pod of a Job (:class:`ReportEndpoint` lists the checks). Only then does it act
(:func:`fluence_core.hybrid.release.apply_report`), on the scout's own pod and its
workers, never on a pod the request names. The protocol is in ``docs/scout-report.md``.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fluence_core import names
from fluence_core.kube.api import PODS, TOKEN_REVIEWS, ClusterAPI, KubeObject
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.hybrid.release import BadReport, apply_report, controlling_job, parse_report
from fluence_core.settings import Settings
from fluence_core.webhook.transport.routes import Reply
from fluence_core.kube.meta import labels_of, metadata_of

MAX_REPORT = 16 * 1024
"""Bytes a report's body may have (it is a handful of short fields)."""


class Refused(Exception):
    """A report refused: ``message`` is sent back, ``detail`` (the API server's words about a
    token) only logged, so no error body tells a caller how authentication judged it."""

    def __init__(self, status: int, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.detail = detail


TOKEN_TTL = 60.0
"""Seconds a token the API server accepted is trusted without another TokenReview (the pod
it names is still read on every report)."""
REFUSED_TTL = 10.0
"""Seconds a refused token is refused again without another TokenReview."""
REVIEW_RATE = 5.0
"""TokenReviews per second the report endpoint may spend on tokens it has not seen, ..."""
REVIEW_BURST = 10
"""... and at once: unauthenticated traffic never spends more of the webhook's API budget."""
REMEMBERED_TOKENS = 1024


class TokenReviews:
    """Who a token is, asked of the API server at most once per token per :data:`TOKEN_TTL`
    (:data:`REFUSED_TTL` for a refused one), and for tokens not seen lately at most
    :data:`REVIEW_RATE` per second (a 429 past that), so bogus reports cannot spend the
    webhook's shared API rate (docs/scout-report.md). Tokens are kept as their SHA-256."""

    def __init__(self, review: Callable[[str], Caller], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._review = review
        self._clock = clock
        self._lock = threading.Lock()
        self._known: collections.OrderedDict[str, tuple[float, Caller | Refused]] = (
            collections.OrderedDict())
        self._tokens = float(REVIEW_BURST)
        self._filled = clock()
        self.reviews = 0
        """TokenReviews asked so far."""

    def __call__(self, token: str) -> Caller:
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        with self._lock:
            found = self._known.get(key)
            if found is not None and found[0] > now:
                self._known.move_to_end(key)
                if isinstance(found[1], Refused):
                    raise found[1]
                return found[1]
            self._tokens = min(float(REVIEW_BURST),
                               self._tokens + (now - self._filled) * REVIEW_RATE)
            self._filled = now
            if self._tokens < 1:
                raise Refused(429, "too many reports with tokens not seen lately; send it"
                                   " again in a second")
            self._tokens -= 1
            self.reviews += 1
        try:
            caller: Caller | Refused = self._review(token)
        except Refused as refused:
            caller = refused
        with self._lock:
            ttl = REFUSED_TTL if isinstance(caller, Refused) else TOKEN_TTL
            self._known[key] = (self._clock() + ttl, caller)
            while len(self._known) > REMEMBERED_TOKENS:
                self._known.popitem(last=False)
        if isinstance(caller, Refused):
            raise caller
        return caller


@dataclass(frozen=True)
class Caller:
    """Who a token says the caller is."""

    username: str
    namespace: str
    service_account: str
    pod_name: str
    pod_uid: str

    def __str__(self) -> str:
        return f"pod {self.namespace}/{self.pod_name} ({self.username})"


def _bearer(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused(401, "an Authorization: Bearer <token> header is required (the projected"
                           " ServiceAccount token mounted in the sidecar)")
    return token.strip()


def _one(extra: Mapping[str, Any], key: str) -> str | None:
    values = extra.get(key)
    if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str):
        return values[0]
    return None


class ReportEndpoint:
    """Authenticates a scout's report and acts on it. Each report is checked, in order,
    and refused with a JSON error and a log line otherwise:

    1. a bearer token (401 without one);
    2. a TokenReview (through the cluster wrapper) says it is valid for Fluence's
       audience (:attr:`~fluence_core.settings.HybridSettings.report_audience`): a token for
       another audience, expired, or made up is 401;
    3. the token is a ServiceAccount token bound to a pod (the kubelet's projected
       token carries ``authentication.kubernetes.io/pod-name`` and ``pod-uid``): 403
       otherwise;
    4. that pod exists with that uid, runs under that ServiceAccount, and is the
       scout of a shared group (role label and group label, and the sidecar
       container, all set by the webhook) that a Job controls: 403 otherwise. Its
       workers are then the pods that same Job (by uid) controls and Fluence marked
       as workers (:func:`fluence_core.hybrid.release.workers_of`): a bare pod dressed as a
       scout matches nothing.
    """

    def __init__(self, cluster: ClusterAPI, settings: Settings) -> None:
        self.cluster = cluster
        self.audience = settings.hybrid.report_audience
        self.gate = settings.hybrid.quantum_gate
        self.tokens = TokenReviews(self.authenticate)

    path = names.REPORT_PATH
    max_body = MAX_REPORT

    def post(self, headers: Mapping[str, str], body: bytes) -> Reply:
        """The :class:`~fluence_core.webhook.transport.routes.Route`'s answer: the bearer
        token is in the ``authorization`` header."""
        return self.handle(headers.get("authorization"), body)

    def handle(self, authorization: str | None, body: bytes) -> Reply:
        caller: Caller | None = None
        try:
            token = _bearer(authorization)
            try:
                report = parse_report(json.loads(body))
            except RecursionError:  # "[[[[..." within MAX_REPORT: json gives up, not ValueError
                raise Refused(400, "bad report: the JSON nests too deeply") from None
            except (json.JSONDecodeError, UnicodeDecodeError, BadReport) as error:
                raise Refused(400, f"bad report: {error}") from None
            except ValueError:  # int() past 4,300 digits: its message names Python internals
                raise Refused(400, "bad report: a number in it is too long") from None
            caller = self.tokens(token)
            scout = self.scout(caller)
            return Reply(200, apply_report(self.cluster, scout, report, self.gate))
        except Refused as refused:
            logger.warning("scout report refused (%d) from %s: %s%s", refused.status,
                           caller or "an unidentified caller", refused.message,
                           f" ({refused.detail})" if refused.detail else "")
            return Reply(refused.status, {"error": refused.message, "code": refused.status})
        except ApiError as error:
            logger.warning("scout report from %s failed: %s", caller or "?", error)
            message = f"the API server failed: {error}; send it again"
            return Reply(503, {"error": message, "code": 503})
        except Exception as error:  # the last line: a JSON answer, never a dropped connection
            logger.exception("scout report from %s: unexpected failure", caller or "?")
            message = f"fluence failed on this report ({type(error).__name__}); send it again"
            return Reply(500, {"error": message, "code": 500})

    def authenticate(self, token: str) -> Caller:
        """The pod the token is bound to, through a TokenReview for Fluence's audience."""
        review = self.cluster.create(
            TOKEN_REVIEWS, {"spec": {"token": token, "audiences": [self.audience]}}
        )
        status: KubeObject = review.get("status") or {}
        if not status.get("authenticated"):
            why = str(status.get("error") or "not authenticated")
            raise Refused(401, f"the token is not valid for audience {self.audience!r}",
                          detail=why)
        if self.audience not in (status.get("audiences") or []):
            raise Refused(401, f"the token is not for audience {self.audience!r}")
        user = status.get("user") or {}
        username = str(user.get("username") or "")
        prefix = names.SERVICE_ACCOUNT_USER_PREFIX
        namespace, _, account = username.removeprefix(prefix).partition(":")
        extra = user.get("extra") or {}
        pod_name = _one(extra, names.TOKEN_POD_NAME_EXTRA)
        pod_uid = _one(extra, names.TOKEN_POD_UID_EXTRA)
        if not username.startswith(prefix) or not account or not pod_name or not pod_uid:
            raise Refused(403, f"{username or 'the caller'} is not a ServiceAccount token bound"
                               " to a pod (mount the projected token the webhook injected)")
        return Caller(username, namespace, account, pod_name, pod_uid)

    def scout(self, caller: Caller) -> KubeObject:
        """The caller's pod, if it is the scout of a shared group."""
        pod = self.cluster.get(PODS, caller.pod_name, caller.namespace)
        meta = metadata_of(pod or {})
        if pod is None or meta.get("uid") != caller.pod_uid:
            raise Refused(403, f"pod {caller.namespace}/{caller.pod_name} with uid"
                               f" {caller.pod_uid} does not exist")
        spec = pod.get("spec") or {}
        if (spec.get("serviceAccountName") or "default") != caller.service_account:
            raise Refused(403, f"pod {caller.namespace}/{caller.pod_name} does not run as"
                               f" {caller.username}")
        labels = labels_of(pod or {})
        sidecar = any(c.get("name") == names.SIDECAR_CONTAINER
                      for c in spec.get("containers") or [])
        if labels.get(names.ROLE_LABEL) != names.ROLE_SCOUT or not labels.get(
            names.GROUP_LABEL
        ) or not sidecar:
            raise Refused(403, f"pod {caller.namespace}/{caller.pod_name} is not the scout of"
                               " a shared group")
        if controlling_job(pod) is None:
            raise Refused(403, f"pod {caller.namespace}/{caller.pod_name} is no Job's pod: a"
                               " scout is its workers' sibling, one Indexed Job's index 0")
        return pod
