"""An in-memory Kubernetes API with the semantics Fluence depends on.

:class:`FakeCluster` satisfies :class:`fluence_core.kube.api.ClusterAPI`, so unit tests
and ``fluence sim`` run the real scheduler, webhook and sidecar code with no server. Why
a fake rather than a mock: the code under test relies on how the API server behaves
(resource versions, watches, binding, subresources), so the fake copies those behaviours
rather than the whole API server, and each one was checked against a real 1.36 server in
``tests/e2e``. :class:`FakeCluster` lists them, and what it deliberately simplifies.
"""

from __future__ import annotations

import copy
import re
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from fluence_core import names
from fluence_core.kube.api import (
    ADDED,
    DELETED,
    MODIFIED,
    NAMESPACES,
    PODGROUPS,
    PODS,
    RESYNC,
    TOKEN_REVIEWS,
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
from fluence_core.kube.errors import ApiError, Conflict, NotFound
from fluence_core.kube.patch import apply_patch
from fluence_core.kube.meta import labels_of, metadata_of

_Key = tuple[str, str, str]
_Items = list[KubeObject]  # the method FakeCluster.list shadows the builtin in signatures
"""(plural, namespace or "", name)"""

_INITIAL_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")

_COMMON_FIELDS: Final = frozenset({"metadata.name", "metadata.namespace"})
_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "pods": _COMMON_FIELDS | {
        "spec.nodeName", "spec.schedulerName", "spec.restartPolicy", "spec.serviceAccountName",
        "status.phase", "status.podIP", "status.nominatedNodeName",
    },
    "nodes": _COMMON_FIELDS | {"spec.unschedulable"},
    "events": _COMMON_FIELDS | {
        "involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
        "involvedObject.uid", "reason", "type", "source", "reportingComponent",
    },
}
"""Field selectors each kind supports; the API server answers 400 to any other."""

_POD_MUTABLE_SPEC: Final = ("schedulingGates", "tolerations", "activeDeadlineSeconds")


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Change:
    rv: int
    plural: str
    kind: str  # ADDED / MODIFIED / DELETED
    old: KubeObject | None
    new: KubeObject


class FakeCluster:
    """In-memory :class:`~fluence_core.kube.api.ClusterAPI`.

    ``now`` supplies timestamps (virtual time in the simulator); ``clock`` and
    ``history`` bound watch waits and how many changes a watch can resume from.
    What it copies of a real API server:

    * one resourceVersion counter for everything, increasing on every write; a
      write that changes nothing is a no-op (no new version, no event);
    * watches from any retained version; a watch with a field or label selector
      sees ADDED/DELETED when an object starts/stops matching (as the watch cache
      does); :meth:`compact` drops history so a watch from before it gets the
      RESYNC path a 410 triggers on a real server;
    * ``pods/binding``: sets ``spec.nodeName`` and the ``PodScheduled`` condition;
      Conflict if the pod is already bound, carries scheduling gates, or its UID
      differs from the one given;
    * the status subresource: the main endpoint keeps the old status, the status
      endpoint changes only status; pods start ``Pending`` whatever status they
      were created with, Nodes keep theirs (tests create them with capacity);
    * pod specs are immutable but for images, tolerations, activeDeadlineSeconds
      and removing scheduling gates (422 otherwise);
    * PodGroups need exactly one scheduling policy, which is immutable; they get
      ``disruptionMode: Pod`` and the ``podgroup-protection`` finalizer;
    * namespaces must exist (``default``, ``kube-system``, ``kube-public`` and
      ``kube-node-lease`` do from the start);
    * TokenReviews: :meth:`issue_token` mints a ServiceAccount token bound to a pod
      (as a TokenRequest with a pod ``boundObjectRef``); a review of it is
      authenticated only for its audience and while that pod exists with that uid,
      and names the pod in ``user.extra``; nothing is stored.

    Deliberately simpler: deletion is immediate (a real server keeps a bound pod
    with a ``deletionTimestamp`` until its kubelet confirms — the fake emits that
    MODIFIED, then DELETED at once — and a PodGroup until
    its finalizer goes; here neither waits), there is no garbage collection, and no
    controller runs (Jobs create no pods).

    Watches need no threads: ``watch(..., timeout=0)`` yields what is pending and
    returns. With a positive timeout (or None: forever) it waits on a condition
    variable for writes from other threads.
    """

    def __init__(self, *, now: Callable[[], datetime] = _utcnow,
                 clock: Callable[[], float] = time.monotonic, history: int = 100_000) -> None:
        self._now = now
        self._clock = clock
        self._history = history
        self._objects: dict[_Key, KubeObject] = {}
        self._log: list[_Change] = []
        self._log_rvs: list[int] = []
        self._by_plural: dict[str, tuple[list[int], list[_Change]]] = {}
        """The same changes per kind, so a watch reads only its own kind's (not every write since).
        """
        self._floor = 0  # changes with rv <= floor are forgotten
        self._rv = 0
        self._serial = 0
        self._cond = threading.Condition(threading.RLock())
        self._tokens: dict[str, tuple[str, KubeObject]] = {}
        """token -> (audience, the pod it is bound to)"""
        for name in _INITIAL_NAMESPACES:
            self.create(NAMESPACES, {"metadata": {"name": name}})

    # -- helpers for tests and the simulator -------------------------------

    def issue_token(self, pod: Mapping[str, Any], audience: str) -> str:
        """A token of ``pod``'s ServiceAccount, bound to ``pod``, for ``audience``."""
        with self._cond:
            self._serial += 1
            token = f"fake-token-{self._serial:05x}"
            self._tokens[token] = (audience, copy.deepcopy(dict(pod)))
            return token

    def _review_token(self, spec: Mapping[str, Any]) -> KubeObject:
        found = self._tokens.get(str(spec.get("token") or ""))
        wanted = list(spec.get("audiences") or [])
        if found is None:
            return {"authenticated": False, "error": "invalid bearer token"}
        audience, pod = found
        if wanted and audience not in wanted:
            return {"authenticated": False, "error": "token audiences do not match"}
        meta = metadata_of(pod)
        current = self._objects.get(self._key(PODS, meta.get("name", ""), meta.get("namespace")))
        if current is None or current["metadata"].get("uid") != meta.get("uid"):
            return {"authenticated": False, "error": "the pod the token is bound to is gone"}
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        return {
            "authenticated": True,
            "audiences": [audience],
            "user": {
                "username": f"system:serviceaccount:{meta.get('namespace')}:{account}",
                "extra": {
                    names.TOKEN_POD_NAME_EXTRA: [meta.get("name")],
                    names.TOKEN_POD_UID_EXTRA: [meta.get("uid")],
                },
            },
        }

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out."""
        return str(self._rv)

    def compact(self) -> None:
        """Forget all history, so watches from older versions get 410 → RESYNC."""
        with self._cond:
            self._log.clear()
            self._log_rvs.clear()
            self._by_plural.clear()
            self._floor = self._rv

    def events(self, *, reason: str | None = None,
               involved_name: str | None = None) -> list[KubeObject]:
        """Events posted so far (oldest first), optionally filtered."""
        found = [
            copy.deepcopy(obj) for (plural, _, _), obj in self._objects.items()
            if plural == "events"
            and (reason is None or obj.get("reason") == reason)
            and (involved_name is None or obj["involvedObject"].get("name") == involved_name)
        ]
        return sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))

    # -- ClusterAPI: reads ---------------------------------------------------

    def get(
        self, resource: ResourceRef, name: str, namespace: str | None = None
    ) -> KubeObject | None:
        """A deep copy of the object, or None."""
        res = resolve(resource)
        with self._cond:
            found = self._objects.get(self._key(res, name, namespace))
            return copy.deepcopy(found) if found is not None else None

    def list(self, resource: ResourceRef, namespace: str | None = None, *,
             label_selector: str | None = None,
             field_selector: str | None = None) -> ObjectList:
        """Matching objects ordered by namespace and name, and the current version."""
        res = resolve(resource)
        match = _Matcher(res, namespace, label_selector, field_selector)
        with self._cond:
            items = [copy.deepcopy(obj) for key, obj in sorted(self._objects.items())
                     if key[0] == res.plural and match(obj)]
            return ObjectList(items, str(self._rv))

    def watch(self, resource: ResourceRef, namespace: str | None = None, *,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None,
              timeout: float | None = None,
              cancel: Cancellation | None = None) -> Iterator[WatchEvent]:
        """Changes after ``resource_version``; the start point is fixed when this is called.
        ``cancel`` wakes a watch waiting for the next change, which then ends."""
        res = resolve(resource)
        match = _Matcher(res, namespace, label_selector, field_selector)
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            if resource_version and resource_version != "0":
                initial: list[KubeObject] = []
                cursor = int(resource_version)
            else:
                snapshot = self.list(res, namespace, label_selector=label_selector,
                                     field_selector=field_selector)
                initial = snapshot.items
                cursor = int(snapshot.resource_version)
        return self._watch(res, match, initial, cursor, deadline, cancel or Cancellation())

    def _watch(self, res: Resource, match: _Matcher, initial: _Items, cursor: int,
               deadline: float | None, cancel: Cancellation) -> Iterator[WatchEvent]:
        forget = cancel.on_cancel(self._wake_watches)
        try:
            yield from self._events(res, match, initial, cursor, deadline, cancel)
        finally:
            forget()

    def _wake_watches(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _events(self, res: Resource, match: _Matcher, initial: _Items, cursor: int,
                deadline: float | None, cancel: Cancellation) -> Iterator[WatchEvent]:
        for obj in initial:
            if cancel.cancelled:
                return
            yield ADDED, obj
        while True:
            with self._cond:
                if cancel.cancelled:
                    return
                if cursor < self._floor:
                    fresh = self.list(res, match.namespace, label_selector=match.labels_text,
                                      field_selector=match.fields_text)
                    cursor = int(fresh.resource_version)
                    pending: list[WatchEvent] = [(RESYNC, {
                        "apiVersion": "v1", "kind": "List", "items": fresh.items,
                        "metadata": {"resourceVersion": fresh.resource_version}})]
                else:
                    pending = []
                    rvs, changes = self._by_plural.get(res.plural, ([], []))
                    for change in changes[bisect_right(rvs, cursor):]:
                        event = _visible(change, match)
                        if event is not None:
                            pending.append(event)
                    cursor = max(cursor, self._rv)
                if not pending:
                    left = None if deadline is None else deadline - self._clock()
                    if left is not None and left <= 0:
                        return
                    self._cond.wait(left)
                    continue
            yield from pending

    # -- ClusterAPI: writes ----------------------------------------------------

    def create(self, resource: ResourceRef, body: Mapping[str, Any],
               namespace: str | None = None) -> KubeObject:
        """Store a new object: uid, creationTimestamp, resourceVersion, generation filled in."""
        res = resolve(resource)
        obj = copy.deepcopy(dict(body))
        metadata = obj.setdefault("metadata", {})
        with self._cond:
            if res.plural == TOKEN_REVIEWS.plural:
                obj.update(apiVersion=res.api_version, kind=res.kind,
                           status=self._review_token(obj.get("spec") or {}))
                return obj
            if res.namespaced:
                ns = namespace or metadata.get("namespace") or "default"
                if self._objects.get(("namespaces", "", ns)) is None:
                    raise NotFound(404, f'namespaces "{ns}" not found', "NotFound")
                metadata["namespace"] = ns
            else:
                metadata.pop("namespace", None)
            if not metadata.get("name"):
                if not metadata.get("generateName"):
                    raise ApiError(422, "name or generateName is required", "Invalid")
                self._serial += 1
                metadata["name"] = f"{metadata['generateName']}{self._serial:05x}"
            key = self._key(res, metadata["name"], metadata.get("namespace"))
            if key in self._objects:
                raise Conflict(409, f'{res.plural} "{metadata["name"]}" already exists',
                               "AlreadyExists")
            obj["apiVersion"] = res.api_version
            obj["kind"] = res.kind
            self._serial += 1
            metadata["uid"] = str(uuid.UUID(int=self._serial, version=4))
            metadata["creationTimestamp"] = _stamp(self._now())
            metadata["generation"] = 1
            if res.reset_status_on_create:
                obj.pop("status", None)
            if res == PODS:
                spec = obj.setdefault("spec", {})
                spec.setdefault("schedulerName", "default-scheduler")
                spec.setdefault("priority", 0)
                obj["status"] = {"phase": "Pending"}
            if res == PODGROUPS:
                _check_podgroup(obj)
                obj["spec"].setdefault("disruptionMode", "Pod")
                metadata.setdefault("finalizers", []).append(names.PODGROUP_FINALIZER)
            return self._commit(res, key, ADDED, None, obj)

    def replace(self, resource: ResourceRef, body: Mapping[str, Any],
                namespace: str | None = None) -> KubeObject:
        """Replace the object; a stale ``metadata.resourceVersion`` raises Conflict."""
        res = resolve(resource)
        metadata = metadata_of(body)
        with self._cond:
            key = self._key(res, metadata.get("name", ""), namespace or metadata.get("namespace"))
            old = self._existing(res, key)
            new = copy.deepcopy(dict(body))
            self._check_version(res, old, new)
            return self._update(res, key, old, new, status_only=False)

    def patch(self, resource: ResourceRef, name: str, patch: Patch,
              namespace: str | None = None, *, patch_type: PatchType = "merge") -> KubeObject:
        """Apply a merge or JSON patch to everything but status."""
        return self._patch(resolve(resource), name, patch, namespace, patch_type, False)

    def patch_status(self, resource: ResourceRef, name: str, patch: Patch,
                     namespace: str | None = None, *,
                     patch_type: PatchType = "merge") -> KubeObject:
        """Apply a merge or JSON patch to status only."""
        res = resolve(resource)
        if not res.status_subresource:
            raise NotFound(404, f"{res.plural} has no status subresource", "NotFound")
        return self._patch(res, name, patch, namespace, patch_type, True)

    def delete(self, resource: ResourceRef, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None,
               propagation: Propagation | None = None) -> bool:
        """Remove at once, whatever the grace period; a bound pod is marked terminating first.
        No garbage collector runs here: ``propagation`` changes nothing."""
        res = resolve(resource)
        with self._cond:
            key = self._key(res, name, namespace)
            old = self._objects.get(key)
            if old is None:
                return False
            if res == PODS and (old.get("spec") or {}).get("nodeName"):
                # A bound pod is first marked terminating (MODIFIED), as the
                # server does even with grace 0, then removed.
                marked = copy.deepcopy(old)
                marked["metadata"]["deletionTimestamp"] = _stamp(self._now())
                marked["metadata"]["deletionGracePeriodSeconds"] = grace_period_seconds or 0
                old = self._commit(res, key, MODIFIED, old, marked)
            self._commit(res, key, DELETED, old, copy.deepcopy(old))
            return True

    def bind(self, namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        """Assign the pod to the node, refusing as ``pods/binding`` does."""
        with self._cond:
            key = self._key(PODS, pod, namespace)
            old = self._existing(PODS, key)
            spec = old.get("spec") or {}
            if uid and old["metadata"].get("uid") != uid:
                raise Conflict(409, f"Precondition failed: UID in precondition: {uid}, "
                               f"UID in object meta: {old['metadata'].get('uid')}", "Conflict")
            if spec.get("nodeName"):
                raise Conflict(409, f"pod {pod} is already assigned to node "
                               f'"{spec["nodeName"]}"', "Conflict")
            if spec.get("schedulingGates"):
                raise Conflict(409, f"pod {pod} has non-empty .spec.schedulingGates", "Conflict")
            new = copy.deepcopy(old)
            new["spec"]["nodeName"] = node
            conditions = new.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True",
                               "lastTransitionTime": _stamp(self._now())})
            self._commit(PODS, key, MODIFIED, old, new)

    def post_event(self, involved: Mapping[str, Any], type: str, reason: str, message: str, *,
                   action: str | None = None) -> KubeObject:
        """Store a core/v1 Event like the real wrapper posts it."""
        event = build_event(involved, type, reason, message, self._now(), action=action,
                            instance="fake")
        return self.create("events", event)

    # -- internals -------------------------------------------------------------

    @staticmethod
    def _key(res: Resource, name: str, namespace: str | None) -> _Key:
        return (res.plural, (namespace or "default") if res.namespaced else "", name)

    def _existing(self, res: Resource, key: _Key) -> KubeObject:
        found = self._objects.get(key)
        if found is None:
            raise NotFound(404, f'{res.plural} "{key[2]}" not found', "NotFound")
        return found

    @staticmethod
    def _check_version(res: Resource, old: KubeObject, new: KubeObject) -> None:
        wanted = metadata_of(new).get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise Conflict(409, f'Operation cannot be fulfilled on {res.plural} '
                           f'"{old["metadata"]["name"]}": the object has been modified; '
                           "please apply your changes to the latest version and try again",
                           "Conflict")

    def _patch(self, res: Resource, name: str, patch: Patch, namespace: str | None,
               patch_type: PatchType, status_only: bool) -> KubeObject:
        with self._cond:
            key = self._key(res, name, namespace)
            old = self._existing(res, key)
            if patch_type == "json":
                if isinstance(patch, Mapping):
                    raise ApiError(422, "a JSON patch must be a list of operations", "Invalid")
                try:
                    new = apply_patch(copy.deepcopy(old), [dict(op) for op in patch])
                except (ValueError, KeyError, IndexError, TypeError) as error:
                    raise ApiError(422, f"the JSON patch failed: {error!r}", "Invalid") from None
            elif isinstance(patch, Mapping):
                new = _merge_patch(old, patch)
                self._check_version(res, old, new)
            else:
                raise ApiError(400, "a merge patch must be an object", "BadRequest")
            return self._update(res, key, old, new, status_only=status_only)

    def _update(self, res: Resource, key: _Key, old: KubeObject, new: KubeObject, *,
                status_only: bool) -> KubeObject:
        """Keep what the endpoint may not change, validate, store unless nothing changed."""
        if status_only:
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        else:
            if res.status_subresource:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            if res == PODS:
                _check_pod_update(old, new)
            if res == PODGROUPS:
                _check_podgroup(new)
                policy = (new.get("spec") or {}).get("schedulingPolicy")
                if policy != old["spec"].get("schedulingPolicy"):
                    raise ApiError(422, "spec.schedulingPolicy: field is immutable", "Invalid")
        metadata = new.setdefault("metadata", {})
        for field in ("name", "namespace", "uid", "creationTimestamp", "generation",
                      "resourceVersion"):
            if field in old["metadata"]:
                metadata[field] = old["metadata"][field]
            else:
                metadata.pop(field, None)
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        if new == old:
            return copy.deepcopy(old)
        if not status_only and new.get("spec") != old.get("spec"):
            metadata["generation"] = int(old["metadata"].get("generation", 1)) + 1
        return self._commit(res, key, MODIFIED, old, new)

    def _commit(self, res: Resource, key: _Key, kind: str, old: KubeObject | None,
                new: KubeObject) -> KubeObject:
        """Give the write a new version, store it, log it and wake the watchers."""
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        if kind == DELETED:
            self._objects.pop(key, None)
        else:
            self._objects[key] = new
        change = _Change(self._rv, res.plural, kind, old, new)
        self._log.append(change)
        self._log_rvs.append(self._rv)
        rvs, changes = self._by_plural.setdefault(res.plural, ([], []))
        rvs.append(self._rv)
        changes.append(change)
        if len(self._log) > self._history:
            dropped = len(self._log) - self._history
            self._floor = self._log_rvs[dropped - 1]
            del self._log[:dropped], self._log_rvs[:dropped]
            for rvs, changes in self._by_plural.values():
                cut = bisect_right(rvs, self._floor)
                if cut:
                    del rvs[:cut], changes[:cut]
        self._cond.notify_all()
        return copy.deepcopy(new)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _check_pod_update(old: KubeObject, new: KubeObject) -> None:
    """A pod's spec is immutable but for a few fields; gates may only be removed."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or []]
    new_gates = [g.get("name") for g in new_spec.get("schedulingGates") or []]
    if any(gate not in old_gates for gate in new_gates):
        raise ApiError(422, "spec.schedulingGates: Forbidden: only deletion is allowed, "
                       "but found new scheduling gate", "Invalid")

    def frozen(spec: Mapping[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in spec.items() if k not in _POD_MUTABLE_SPEC}
        kept["containers"] = [{k: v for k, v in c.items() if k != "image"}
                              for c in spec.get("containers") or []]
        return kept

    if frozen(old_spec) != frozen(new_spec):
        raise ApiError(422, "spec: Forbidden: pod updates may not change fields other than "
                       "image, activeDeadlineSeconds, tolerations and removing schedulingGates",
                       "Invalid")


def _check_podgroup(group: KubeObject) -> None:
    """A PodGroup needs exactly one scheduling policy, and a gang a positive minCount."""
    policy = (group.get("spec") or {}).get("schedulingPolicy") or {}
    chosen = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(chosen) != 1:
        raise ApiError(422, "spec.schedulingPolicy: must specify exactly one of: `basic`, `gang`",
                       "Invalid")
    if chosen == ["gang"] and int(policy["gang"].get("minCount") or 0) < 1:
        raise ApiError(422, "spec.schedulingPolicy.gang.minCount: must be greater than 0",
                       "Invalid")


def _visible(change: _Change, match: _Matcher) -> WatchEvent | None:
    """What a filtered watch sees of a change: entering is ADDED, leaving is DELETED."""
    was = change.old is not None and match(change.old)
    now = match(change.new)
    if change.kind == DELETED:
        return (DELETED, copy.deepcopy(change.new)) if was else None
    if now and was:
        return MODIFIED, copy.deepcopy(change.new)
    if now:
        return ADDED, copy.deepcopy(change.new)
    if was:
        return DELETED, copy.deepcopy(change.new)
    return None


_TERM: Final = re.compile(
    r"^\s*(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s+\((?P<values>[^)]*)\)\s*$"
    r"|^\s*(?P<key2>[^\s!=(),]+)\s*(?P<op2>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*$"
    r"|^\s*(?P<neg>!)?\s*(?P<key3>[^\s!=(),]+)\s*$"
)


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` value lists."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


def _label_test(term: str) -> Callable[[Mapping[str, str]], bool]:
    found = _TERM.match(term)
    if found is None:
        raise ApiError(400, f"unable to parse requirement: {term!r}", "BadRequest")
    if found["key"]:
        key, values = found["key"], {v.strip() for v in found["values"].split(",")}
        if found["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if found["key2"]:
        key, value = found["key2"], found["value"]
        if found["op2"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    key = found["key3"]
    if found["neg"]:
        return lambda labels: key not in labels
    return lambda labels: key in labels


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Matcher:
    """Namespace, label selector and field selector of one list or watch."""

    def __init__(self, res: Resource, namespace: str | None, labels: str | None,
                 fields: str | None) -> None:
        self.namespace = namespace if res.namespaced else None
        self.labels_text = labels
        self.fields_text = fields
        self._labels = [_label_test(t) for t in _split_terms(labels or "")]
        self._fields: list[tuple[str, bool, str]] = []
        allowed = _FIELDS.get(res.plural, _COMMON_FIELDS)
        for term in _split_terms(fields or ""):
            found = re.match(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
            if found is None:
                raise ApiError(400, f"invalid field selector: {term!r}", "BadRequest")
            path, op, value = found.groups()
            if path not in allowed:
                raise ApiError(400, f'field label not supported: "{path}"', "BadRequest")
            self._fields.append((path, op != "!=", value))

    def __call__(self, obj: Mapping[str, Any]) -> bool:
        metadata = metadata_of(obj)
        if self.namespace is not None and metadata.get("namespace") != self.namespace:
            return False
        labels = labels_of(obj)
        if not all(test(labels) for test in self._labels):
            return False
        return all((_field_value(obj, path) == value) == equal
                   for path, equal, value in self._fields)

