"""The one module that talks to a Kubernetes API server.

:class:`KubeCluster` implements :class:`fluence_core.kube.api.ClusterAPI`
over the official ``kubernetes`` client; nothing else in Fluence imports that
client. It uses only the client's transport (``ApiClient.call_api`` with
``_preload_content=False``): authentication, TLS and connection pooling come
from the client, while paths come from our resource table and bodies stay plain
JSON dicts both ways. Two reasons for not using the generated typed APIs:

* PodGroups (``scheduling.k8s.io/v1alpha2``) are reached through the same
  generic path as every other resource (the route ``CustomObjectsApi`` takes),
  not through ``SchedulingV1alpha2Api``. The generated API follows the client
  version (37.x knows only ``v1alpha3``), while a generic path follows the
  server, so the client pin stops deciding which PodGroup schema we can read.
* The typed ``create_namespaced_pod_binding`` raises ``ValueError('target must
  not be None')`` after a binding that succeeded, because the server answers
  with a Status the model cannot hold; a raw POST has no such trap.

Every request first takes a token from a :class:`TokenBucket` (``kube_qps``,
``kube_burst``), so a burst of bindings cannot flood the API server.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from fluence_core.kube.api import (
    RESYNC,
    Cancellation,
    KubeObject,
    ObjectList,
    Patch,
    PatchType,
    Propagation,
    Resource,
    ResourceRef,
    WatchEvent,
    build_event,
    resolve,
)
from fluence_core.errors import KubeConfigError
from fluence_core.kube.errors import ApiError, Gone, status_error
from fluence_core.log import logger
from fluence_core.settings import KUBE_BURST, KUBE_QPS
from fluence_core.kube.meta import metadata_of

_PATCH_CONTENT_TYPES: Final[Mapping[str, str]] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
_AUTH: Final = ["BearerToken"]
_CONNECT_TIMEOUT: Final = 10.0
_REQUEST_TIMEOUT: Final = 60.0
_WATCH_CHUNK: Final = 300
"""Longest single watch request (seconds); the generator reconnects after it."""


class TokenBucket:
    """Client-side rate limit: ``qps`` tokens a second, at most ``burst`` saved up.

    The clock and the sleep are injectable so tests (and the simulator) run it
    in virtual time. Thread-safe: the scheduler loop and informers share one.
    """

    def __init__(self, qps: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"token bucket needs qps > 0 and burst >= 1, got {qps}, {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._stamp = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, sleeping until one is available; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            self._tokens -= 1.0
            # A negative balance is a debt paid by waiting; reserving under the
            # lock keeps concurrent callers in order without holding it to sleep.
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


def _utcnow() -> datetime:
    return datetime.now(UTC)


class KubeCluster:
    """:class:`~fluence_core.kube.api.ClusterAPI` against a real API server.

    Build one with :meth:`from_kubeconfig` (out of cluster, current context),
    :meth:`in_cluster` (a pod's service account), :meth:`from_token` (explicit
    host, token and CA: tests) or :meth:`connect` (in cluster when possible,
    else kubeconfig).
    """

    def __init__(self, configuration: k8s_client.Configuration, *, qps: float = KUBE_QPS,
                 burst: int = KUBE_BURST, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], datetime] = _utcnow, user_agent: str = "fluence",
                 connections: int | None = None) -> None:
        if connections is not None:
            # urllib3 keeps at most this many connections open; a request made while all
            # are out opens another, which is closed after it (a TLS handshake per request
            # on both sides). The client's default is 5 per CPU: fewer than the threads of
            # a scheduler binding on a pool while its watches hold a connection each.
            configuration.connection_pool_maxsize = max(
                configuration.connection_pool_maxsize or 0, connections)
        self._api = k8s_client.ApiClient(configuration)
        self._api.user_agent = user_agent  # how the API server's audit log names this client
        self.host: str = configuration.host
        self.bucket = TokenBucket(qps, burst, clock=clock, sleep=sleep)
        self.event_bucket = TokenBucket(qps, burst, clock=clock, sleep=sleep)
        """Events have a limit of their own (kube-scheduler posts them through a client of
        their own): a burst of events never holds up a binding."""
        self._clock = clock
        self._now = now
        self._instance = socket.gethostname()

    # -- construction -------------------------------------------------------

    @classmethod
    def from_kubeconfig(cls, path: str | os.PathLike[str] | None = None,
                        context: str | None = None, **options: Any) -> KubeCluster:
        """From a kubeconfig file (``$KUBECONFIG`` or ``~/.kube/config``) and its current context.
        """
        configuration = k8s_client.Configuration()
        where = str(path) if path is not None else os.environ.get("KUBECONFIG") or "~/.kube/config"
        try:
            k8s_config.load_kube_config(
                config_file=str(path) if path is not None else None, context=context,
                client_configuration=configuration,
            )
        except (k8s_config.ConfigException, OSError, ValueError, TypeError) as error:
            raise KubeConfigError(
                f"cannot reach a Kubernetes API server: kubeconfig {where}: {error}"
                " (set KUBECONFIG, or run in a pod with a service account)") from None
        return cls(configuration, **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeCluster:
        """From the service account mounted into the pod Fluence runs in."""
        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, ValueError) as error:
            raise KubeConfigError(
                f"cannot reach a Kubernetes API server: in-cluster service account: {error}"
            ) from None
        return cls(configuration, **options)

    @classmethod
    def from_token(cls, host: str, token: str, *, ca_file: str | os.PathLike[str] | None = None,
                   verify: bool = True, **options: Any) -> KubeCluster:
        """From an explicit server URL, bearer token and CA bundle (tests, e2e harness)."""
        configuration = k8s_client.Configuration()
        configuration.host = host.rstrip("/")
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.verify_ssl = verify
        if ca_file is not None:
            configuration.ssl_ca_cert = str(ca_file)
        return cls(configuration, **options)

    @classmethod
    def connect(cls, qps: float = KUBE_QPS, burst: int = KUBE_BURST,
                connections: int | None = None) -> KubeCluster:
        """In cluster when a service account is mounted, else the kubeconfig's current context;
        ``connections``: how many requests may be in flight at once without opening (and
        closing) a connection each (None: the client's default)."""
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(qps=qps, burst=burst, connections=connections)
        return cls.from_kubeconfig(qps=qps, burst=burst, connections=connections)

    def close(self) -> None:
        """Release the connection pool."""
        self._api.close()

    # -- transport ----------------------------------------------------------

    def _call(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
              body: Any = None, content_type: str = "application/json",
              stream: bool = False, timeout: float = _REQUEST_TIMEOUT,
              bucket: TokenBucket | None = None) -> Any:
        """One request; the decoded JSON body, or the open response when ``stream``."""
        (bucket or self.bucket).acquire()
        try:
            response = self._api.call_api(
                path, method,
                query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body, auth_settings=_AUTH, _preload_content=False,
                _request_timeout=(_CONNECT_TIMEOUT, timeout),
            )
        except ApiException as error:
            raise status_error(error.status or 0, error.body or error.reason) from None
        except urllib3.exceptions.HTTPError as error:
            raise ApiError(0, f"{method} {path}: {error}", "ConnectionError") from None
        if stream:
            return response
        try:
            data = response.data
        finally:
            response.release_conn()
        return json.loads(data) if data else {}

    def _path(self, resource: Resource, namespace: str | None, name: str | None = None,
              subresource: str | None = None) -> str:
        if resource.namespaced and name is not None and namespace is None:
            namespace = "default"
        return resource.path(namespace if resource.namespaced else None, name, subresource)

    # -- ClusterAPI ---------------------------------------------------------

    def get(
        self, resource: ResourceRef, name: str, namespace: str | None = None
    ) -> KubeObject | None:
        """The object, or None on 404."""
        try:
            result: KubeObject = self._call("GET", self._path(resolve(resource), namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return result

    def list(self, resource: ResourceRef, namespace: str | None = None, *,
             label_selector: str | None = None,
             field_selector: str | None = None) -> ObjectList:
        """All matching objects (following ``continue`` tokens) and the list's resourceVersion."""
        res = resolve(resource)
        items: list[KubeObject] = []
        token: str | None = None
        while True:
            page: KubeObject = self._call("GET", self._path(res, namespace), query={
                "labelSelector": label_selector, "fieldSelector": field_selector,
                "limit": 500, "continue": token,
            })
            for item in page.get("items") or []:
                # List items omit kind/apiVersion; put them back so every object
                # a caller holds looks the same whether it came from get, list or watch.
                item.setdefault("kind", res.kind)
                item.setdefault("apiVersion", res.api_version)
                items.append(item)
            metadata = metadata_of(page)
            token = metadata.get("continue")
            if not token:
                return ObjectList(items, str(metadata.get("resourceVersion") or ""))

    def watch(self, resource: ResourceRef, namespace: str | None = None, *,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None,
              timeout: float | None = None,
              cancel: Cancellation | None = None) -> Iterator[WatchEvent]:
        """Events after ``resource_version``; see :meth:`ClusterAPI.watch`.

        Without a resourceVersion the watch lists first and yields ADDED for
        each object, as an informer does (it also sidesteps etcd 3.4 refusing a
        version-less watch right after a write). The server's granularity is a
        whole second, so ``timeout=0`` means one request of one second.
        ``cancel`` shuts the streaming response's socket, so a read waiting for
        the next event returns at once; that connection is not reused.
        """
        res = resolve(resource)
        deadline = None if timeout is None else self._clock() + timeout
        return self._watch(res, namespace, resource_version, label_selector, field_selector,
                           deadline, cancel or Cancellation())

    def _watch(self, res: Resource, namespace: str | None, resource_version: str | None,
               label_selector: str | None, field_selector: str | None,
               deadline: float | None, cancel: Cancellation) -> Iterator[WatchEvent]:
        rv = resource_version
        if not rv or rv == "0":
            initial = self.list(res, namespace, label_selector=label_selector,
                                field_selector=field_selector)
            for item in initial.items:
                if cancel.cancelled:
                    return
                yield "ADDED", item
            rv = initial.resource_version
        first = True
        while not cancel.cancelled:
            if deadline is None:
                seconds = _WATCH_CHUNK
            else:
                left = deadline - self._clock()
                if left <= 0 and not first:
                    return
                seconds = max(1, min(_WATCH_CHUNK, math.ceil(left)))
            first = False
            query = {
                "watch": "true", "allowWatchBookmarks": "true", "resourceVersion": rv,
                "timeoutSeconds": seconds, "labelSelector": label_selector,
                "fieldSelector": field_selector,
            }
            try:
                response = self._call("GET", self._path(res, namespace), query=query,
                                      stream=True, timeout=seconds + _CONNECT_TIMEOUT)
                forget = cancel.on_cancel(lambda: _interrupt(response))
                try:
                    for line in _lines(response):
                        event = json.loads(line)
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            raise status_error(500, obj)
                        rv = metadata_of(obj).get("resourceVersion") or rv
                        if kind == "BOOKMARK":
                            continue
                        obj.setdefault("kind", res.kind)
                        obj.setdefault("apiVersion", res.api_version)
                        yield str(kind), obj
                finally:
                    forget()
                    if cancel.cancelled:  # its socket is shut: never back to the pool
                        response.close()
                    response.release_conn()
            except Gone:
                if cancel.cancelled:
                    return
                logger.info("watch %s at resourceVersion %s expired (410); re-listing",
                            res.plural, rv)
                fresh = self.list(res, namespace, label_selector=label_selector,
                                  field_selector=field_selector)
                rv = fresh.resource_version
                yield RESYNC, {"apiVersion": "v1", "kind": "List", "items": fresh.items,
                               "metadata": {"resourceVersion": rv}}
            except (urllib3.exceptions.HTTPError, OSError) as error:
                if cancel.cancelled:
                    return
                # A dropped stream is routine (load balancers, server restarts):
                # resume from the last version seen, which loses nothing.
                logger.debug("watch %s interrupted (%s); resuming at %s", res.plural, error, rv)
            except Exception:
                if cancel.cancelled:
                    return  # whatever the read its cancellation interrupted raised
                raise

    def create(self, resource: ResourceRef, body: Mapping[str, Any],
               namespace: str | None = None, *, dry_run: bool = False) -> KubeObject:
        """POST the object; the namespace defaults to the body's, then ``default``. With
        ``dry_run`` (``dryRun=All``) admission runs in full and nothing is stored: the answer
        is the object as it would have been stored."""
        res = resolve(resource)
        namespace = namespace or metadata_of(body).get("namespace")
        document = {"apiVersion": res.api_version, "kind": res.kind, **body}
        result: KubeObject = self._call("POST", self._path(res, namespace or "default"),
                                      query={"dryRun": "All"} if dry_run else None,
                                      body=document)
        return result

    def replace(self, resource: ResourceRef, body: Mapping[str, Any],
                namespace: str | None = None) -> KubeObject:
        """PUT the whole object (optimistic concurrency through metadata.resourceVersion)."""
        res = resolve(resource)
        metadata = metadata_of(body)
        document = {"apiVersion": res.api_version, "kind": res.kind, **body}
        result: KubeObject = self._call(
            "PUT", self._path(res, namespace or metadata.get("namespace"), metadata["name"]),
            body=document)
        return result

    def patch(self, resource: ResourceRef, name: str, patch: Patch,
              namespace: str | None = None, *, patch_type: PatchType = "merge") -> KubeObject:
        """PATCH with ``application/merge-patch+json`` or ``application/json-patch+json``."""
        return self._patch(resolve(resource), name, patch, namespace, patch_type, None)

    def patch_status(self, resource: ResourceRef, name: str, patch: Patch,
                     namespace: str | None = None, *,
                     patch_type: PatchType = "merge") -> KubeObject:
        """PATCH the ``status`` subresource."""
        return self._patch(resolve(resource), name, patch, namespace, patch_type, "status")

    def _patch(self, res: Resource, name: str, patch: Patch, namespace: str | None,
               patch_type: PatchType, subresource: str | None) -> KubeObject:
        body: Any = list(patch) if patch_type == "json" else dict(patch)  # type: ignore[arg-type]
        result: KubeObject = self._call(
            "PATCH", self._path(res, namespace, name, subresource), body=body,
            content_type=_PATCH_CONTENT_TYPES[patch_type])
        return result

    def delete(self, resource: ResourceRef, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None,
               propagation: Propagation | None = None) -> bool:
        """DELETE; False on 404. ``grace_period_seconds=0`` removes a bound pod at once."""
        query = {"gracePeriodSeconds": grace_period_seconds, "propagationPolicy": propagation}
        try:
            self._call("DELETE", self._path(resolve(resource), namespace, name), query=query)
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    def bind(self, namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        """POST a Binding to ``pods/<pod>/binding``; ``uid`` guards against a recreated pod."""
        metadata: KubeObject = {"name": pod, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        self._call("POST", self._path(resolve("pods"), namespace, pod, "binding"), body=body)

    def post_event(self, involved: Mapping[str, Any], type: str, reason: str, message: str, *,
                   action: str | None = None) -> KubeObject:
        """Create a core/v1 Event (see :func:`fluence_core.kube.api.build_event`)."""
        event = build_event(involved, type, reason, message, self._now(), action=action,
                            instance=self._instance)
        path = self._path(resolve("events"), event["metadata"]["namespace"])
        result: KubeObject = self._call("POST", path, body=event, bucket=self.event_bucket)
        return result


def _interrupt(response: Any) -> None:
    """Wake the thread reading ``response``, a streaming watch, from another thread: shut its
    socket for reading, so the blocked read returns (or raises) at once."""
    try:
        response.shutdown()
        return
    except (AttributeError, NotImplementedError, ValueError, RuntimeError, OSError):
        pass  # an urllib3 without shutdown(), or a response already released
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: nothing is reading it


def _lines(response: Any) -> Iterator[str]:
    """Newline-delimited JSON from a chunked watch response, however the chunks fall."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        if b"\n" not in chunk:
            buffer += chunk
            continue
        lines = (buffer + chunk).split(b"\n")  # one pass over a chunk of many events
        buffer = lines.pop()
        for line in lines:
            if line.strip():
                yield line.decode("utf-8", errors="replace")
    if buffer.strip():
        yield buffer.decode("utf-8", errors="replace")
