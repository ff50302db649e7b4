"""Leader election on a ``coordination.k8s.io/v1`` Lease, so two replicas never both schedule.

The holder renews the Lease every ``renew`` seconds; another replica takes it
over only once ``renewTime + leaseDurationSeconds`` has passed. Updates use the
Lease's resourceVersion, so two candidates racing for it cannot both win.
A leader that fails to renew before its Lease would expire stops leading.

A leader that stops on purpose (SIGTERM or SIGINT in ``fluence up``: a rolling update)
*releases* the Lease once its scheduling loop has stopped, as client-go's
``ReleaseOnCancel`` does: no holder, a one-second duration. The next candidate then takes
it at its next attempt (within ``renew`` seconds) instead of waiting the Lease out.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Callable

from fluence_core.kube.api import LEASES, ClusterAPI, KubeObject
from fluence_core.errors import FluenceError
from fluence_core.kube.errors import ApiError, Conflict
from fluence_core.log import logger


class LeaseUnavailable(FluenceError):
    """The Lease cannot be taken at all: its namespace is missing or RBAC forbids it."""


def _micro(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    text = stamp.rstrip("Z")
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in text else "%Y-%m-%dT%H:%M:%S"
    return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()


class LeaderElector:
    """Acquire and keep one Lease as ``identity``."""

    def __init__(
        self, cluster: ClusterAPI, name: str, namespace: str, identity: str, *,
        duration: float = 15, renew: float = 5, clock: Callable[[], float] = time.time,
    ) -> None:
        self.cluster = cluster
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.duration = duration
        self.renew = renew
        self.clock = clock
        self.join_timeout = 40.0
        """Seconds :meth:`run` waits for the scheduling loop to stop; the Lease is released
        only when it did (a loop still binding must not overlap the next leader). Longer
        than the 30 s the loop itself gives the bindings in flight."""

    def try_acquire(self) -> bool:
        """One attempt to take or renew the Lease; True while we hold it.

        Raises :class:`LeaseUnavailable` when no retry can help: the namespace does
        not exist, or the API server forbids reading or writing the Lease.
        """
        now = self.clock()
        try:
            lease = self.cluster.get(LEASES, self.name, self.namespace)
        except ApiError as error:
            self._raise_if_unavailable(error, creating=False)
            logger.warning("lease %s/%s: %s", self.namespace, self.name, error)
            return False
        spec_now = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": _micro(now),
        }
        try:
            if lease is None:
                spec_now.update(acquireTime=_micro(now), leaseTransitions=0)
                self.cluster.create(
                    LEASES, {"metadata": {"name": self.name}, "spec": spec_now}, self.namespace
                )
                logger.info("became leader (new lease %s/%s)", self.namespace, self.name)
                return True
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            expires = _parse(spec.get("renewTime")) + float(
                spec.get("leaseDurationSeconds") or self.duration
            )
            if holder not in (None, "", self.identity) and expires > now:
                return False
            if holder != self.identity:
                spec_now.update(
                    acquireTime=_micro(now),
                    leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1,
                )
                logger.info(
                    "taking over lease %s/%s from %s", self.namespace, self.name, holder or "nobody"
                )
            else:
                spec_now["acquireTime"] = spec.get("acquireTime") or _micro(now)
                spec_now["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
            body: KubeObject = {
                "metadata": {
                    "name": self.name,
                    "resourceVersion": lease["metadata"]["resourceVersion"],
                },
                "spec": spec_now,
            }
            self.cluster.replace(LEASES, body, self.namespace)
            return True
        except Conflict:
            return False
        except ApiError as error:
            self._raise_if_unavailable(error, creating=lease is None)
            logger.warning("lease %s/%s: %s", self.namespace, self.name, error)
            return False

    def _raise_if_unavailable(self, error: ApiError, *, creating: bool) -> None:
        where = f"cannot take the leader Lease {self.namespace}/{self.name}"
        if error.status == 404 and creating:
            raise LeaseUnavailable(
                f"{where}: namespace {self.namespace} does not exist (create it, or set "
                "FLUENCE_LEASE_NAMESPACE to one that does)") from None
        if error.status in (401, 403):
            raise LeaseUnavailable(
                f"{where}: {error} (grant get, create and update on "
                f"coordination.k8s.io leases in {self.namespace})") from None

    def run(self, lead: Callable[[threading.Event], None], stop: threading.Event) -> None:
        """Wait for the Lease, then call ``lead(stop_leading)`` in a thread while renewing it."""
        acquired = False  # LeaseUnavailable from try_acquire goes to the caller
        while not stop.is_set() and not (acquired := self.try_acquire()):
            stop.wait(self.renew)
        if stop.is_set():
            if acquired:  # stopped the moment it was won: handed on at once all the same
                self.release()
            return
        leading = threading.Event()
        worker = threading.Thread(target=lead, args=(leading,), daemon=True, name="leader")
        worker.start()
        last = self.clock()
        while not stop.is_set() and worker.is_alive():
            stop.wait(self.renew)
            if self._renew():
                last = self.clock()
            elif self.clock() - last > self.duration:
                logger.error("lost the lease %s/%s; stopping", self.namespace, self.name)
                break
        leading.set()
        worker.join(timeout=self.join_timeout)
        if worker.is_alive():
            logger.warning("the scheduling loop did not stop within %ss; the lease %s/%s is "
                           "left to expire", self.join_timeout, self.namespace, self.name)
        else:
            self.release()  # only while we still hold it: a lost Lease is someone else's

    def release(self) -> bool:
        """Give up the Lease if we hold it (no holder, one second left), so the next candidate
        takes it at once; True when released. A Lease someone else holds is left alone."""
        try:
            lease = self.cluster.get(LEASES, self.name, self.namespace)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.identity:
                return False
            now = _micro(self.clock())
            body: KubeObject = {
                "metadata": {"name": self.name,
                             "resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": {"leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now,
                         "leaseTransitions": int(spec.get("leaseTransitions") or 0)},
            }
            self.cluster.replace(LEASES, body, self.namespace)
        except ApiError as error:  # Conflict included: someone else wrote it meanwhile
            logger.warning("cannot release the lease %s/%s: %s; it expires in %ss",
                           self.namespace, self.name, error, int(self.duration))
            return False
        logger.info("released the lease %s/%s", self.namespace, self.name)
        return True

    def _renew(self) -> bool:
        """Renew while leading: every failure counts against the Lease's duration."""
        try:
            return self.try_acquire()
        except LeaseUnavailable as error:
            logger.warning("%s", error)
            return False
