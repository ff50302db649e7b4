"""Who keeps a connection when the webhook's server is full: fair to the API server.

An idle keep-alive connection costs its holder nothing, so holding one must not keep
anyone else out: otherwise a client holding its address's whole share of idle
connections leaves the API server's next connection closed at accept, and pod creates
fail. :class:`Slots` decides, as each connection is accepted, which connection gives way:
an address competes first with itself, then with the address holding the most, and a
few slots are kept for the API server. docs/webhook-client-auth.md tells the attack
these rules answer.

Not thread-safe: the server calls it under its own lock; each connection's thread sets
its :class:`Slot`'s state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

PENDING: Final = "pending"
"""Accepted: handshake, then waiting for the first request."""
BUSY: Final = "busy"
"""Reading a request or answering it."""
IDLE: Final = "idle"
"""Served, waiting for its next request (keep-alive)."""

RESERVE_SHARE = 8
"""An address holding fewer connections may take a reserved slot (the API server keeps a
few pooled connections per webhook)."""
PENDING_GRACE = 1.0
"""Seconds a new connection has for its handshake and first request before another may
take its place (the API server's take milliseconds)."""
BUSY_IDLE_TIMEOUT = 5.0
"""Seconds an idle keep-alive connection is kept while more than half the slots are open."""


class Slot:
    """One accepted connection as the rules see it: whose, in what state since when, whether
    it proved itself with a client certificate, and whether it was made to give way."""

    __slots__ = ("client", "sock", "state", "since", "authenticated", "evicted")

    def __init__(self, client: str, sock: Any, now: float) -> None:
        self.client = client
        self.sock = sock
        """What to shut down to end it (the TLS socket once wrapped)."""
        self.state: str = PENDING
        self.since = now
        self.authenticated = False
        self.evicted = False

    def enter(self, state: str, now: float) -> None:
        self.state = state
        self.since = now


@dataclass(frozen=True)
class Admission:
    """What :meth:`Slots.admit` decided: the new connection's slot (``None``: close it), the
    spare connection it replaces (to be shut down), and why, for the log."""

    slot: Slot | None
    replaces: Slot | None
    why: str


class Slots:
    """The open connections, and who keeps one when the server is full.

    The rules, applied as each connection is accepted (:meth:`Slots.admit`):

    1. An address holds at most ``max_per_client`` connections. A new one past that takes
       the place of that address's longest-waiting *spare* connection, or is closed if it has
       none: an address competes only with itself (the API server's, when an attacker shares
       its address).
    2. ``max_connections - reserved`` slots are open to anyone. When they are taken, a new
       connection takes the place of a spare connection of the address holding the most, if
       that address holds more than the newcomer's would: no address keeps another out.
    3. Otherwise the ``reserved`` slots: for a server that requires a client certificate
       (every connection that survives its handshake is the API server's), or for an address
       holding fewer than ``reserve_share`` connections (the API server's few pooled ones).
    4. While more than half of ``max_connections`` are open, a connection idle between
       requests for longer than ``busy_idle_timeout`` is closed (:meth:`Slots.stale`); the
       long ``idle_timeout`` that suits the API server's pool holds only while there is room.

    A *spare* connection is one idle between requests, or one that has not finished its
    handshake and first request ``pending_grace`` seconds after it was accepted. A
    connection that presented a client certificate the server verified is never spare and
    never closed for being idle (it is the API server's); nor is one in the middle of a
    request. Without a client CA nothing tells the API server from anyone else at its
    address: the rules then keep one address from starving the others, and a newcomer from
    being refused while someone else's connection only waits.
    """

    def __init__(self, *, max_connections: int, max_per_client: int, reserved: int,
                 client_auth: bool, reserve_share: int = RESERVE_SHARE,
                 pending_grace: float = PENDING_GRACE,
                 busy_idle_timeout: float = BUSY_IDLE_TIMEOUT) -> None:
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.reserved = min(reserved, max_connections)
        self.client_auth = client_auth
        self.reserve_share = reserve_share
        self.pending_grace = pending_grace
        self.busy_idle_timeout = busy_idle_timeout
        self.open: set[Slot] = set()
        self.per_client: dict[str, int] = {}
        self.replaced = 0
        """Connections closed so far to make room (rules 1 and 2) or for idling (rule 4)."""

    def held_by(self, client: str) -> int:
        return self.per_client.get(client, 0)

    def admit(self, client: str, sock: Any, now: float) -> Admission:
        held = self.held_by(client)
        if held >= self.max_per_client:
            spare = self._longest_waiting(
                [s for s in self.open if s.client == client and self._spare(s, now)])
            if spare is None:
                return Admission(None, None, f"{client} holds {held} connections, all in use")
            return self._add(client, sock, now, spare, f"{client} holds {held} connections")
        if len(self.open) < self.max_connections - self.reserved:
            return self._add(client, sock, now, None, "")
        heavier = [s for s in self.open
                   if self.per_client[s.client] > held + 1 and self._spare(s, now)]
        if heavier:
            most = max(self.per_client[s.client] for s in heavier)
            spare = self._longest_waiting([s for s in heavier if self.per_client[s.client] == most])
            assert spare is not None
            return self._add(client, sock, now, spare,
                             f"full; {spare.client} holds {most} connections")
        if len(self.open) < self.max_connections and (
                self.client_auth or held < self.reserve_share):
            return self._add(client, sock, now, None, "")
        return Admission(None, None, f"all {len(self.open)} connections in use")

    def release(self, slot: Slot) -> None:
        """The connection ended (its thread is done); nothing if it was made to give way."""
        if slot in self.open:
            self._remove(slot)

    def stale(self, now: float) -> list[Slot]:
        """Rule 4: the idle connections to close now (taken out of the open ones)."""
        if len(self.open) <= self.max_connections // 2:
            return []
        stale = [s for s in self.open if s.state == IDLE and not s.authenticated
                 and now - s.since > self.busy_idle_timeout]
        for slot in stale:
            self._give_way(slot)
        return stale

    def _spare(self, slot: Slot, now: float) -> bool:
        if slot.authenticated or slot.state == BUSY:
            return False
        return slot.state == IDLE or now - slot.since >= self.pending_grace

    @staticmethod
    def _longest_waiting(slots: list[Slot]) -> Slot | None:
        return min(slots, key=lambda s: s.since, default=None)

    def _add(self, client: str, sock: Any, now: float, spare: Slot | None,
             why: str) -> Admission:
        if spare is not None:
            self._give_way(spare)
        slot = Slot(client, sock, now)
        self.open.add(slot)
        self.per_client[client] = self.per_client.get(client, 0) + 1
        return Admission(slot, spare, why)

    def _give_way(self, slot: Slot) -> None:
        slot.evicted = True
        self.replaced += 1
        self._remove(slot)

    def _remove(self, slot: Slot) -> None:
        self.open.discard(slot)
        left = self.per_client.get(slot.client, 1) - 1
        if left > 0:
            self.per_client[slot.client] = left
        else:
            self.per_client.pop(slot.client, None)
