"""Devices for a pod's claims on one node, chosen as kube-scheduler's structured allocator
chooses them.

Given the claims a pod still needs allocated, the devices reachable from one
node and which of them are free, :func:`allocate` finds devices for every
request of every claim at once, or says why there are none. It is a depth-first
search with backtracking, as kube-scheduler's: requests in the order the claims
list them; for each, its ``firstAvailable`` choices in order; for each choice,
devices in inventory order, each checked against the class's and the request's
CEL selectors and against the claim's ``matchAttribute`` constraints (the first
device of a constraint fixes the value the others must share). ``All`` takes
every matching device reachable from the node and fails if one is not free.

The search is bounded (:data:`MAX_STEPS`): past it the node is refused with
that reason rather than searched for ever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from fluence_core.dra.cel import SelectorError, matches
from fluence_core.dra.claims import ALL, Choice, Claim, DeviceClass, Request
from fluence_core.dra.devices import AttributeValue, Device, Version

MAX_STEPS: Final = 100_000
"""Devices tried for one pod on one node before the search gives up."""


@dataclass(frozen=True)
class Picked:
    """One device allocated for one request (``request`` as the result names it)."""

    claim: int
    """Index of the claim in the list given to :func:`allocate`."""
    request: str
    device_class: str
    device: Device


class _Exhausted(Exception):
    pass


Memo = dict[tuple[str, tuple[str, ...], tuple[str, ...]], "list[Device] | str"]
"""The devices of one node that match a (class, class selectors, request selectors), or
the selector's error: the same for every pod asking alike, until the node's devices
change."""


def allocate(claims: Sequence[Claim], reachable: Sequence[Device],
             classes: Mapping[str, DeviceClass],
             free: Callable[[Device], bool], memo: Memo | None = None) -> list[Picked] | str:
    """Devices for every request of ``claims`` among ``reachable`` ones, or why not;
    ``memo`` keeps which of ``reachable`` match each selector set across calls."""
    memo = {} if memo is None else memo
    slots = [(index, request) for index, claim in enumerate(claims)
             for request in claim.requests]
    matching: dict[tuple[int, Choice], list[Device]] = {}
    for index, claim in enumerate(claims):
        for request in claim.requests:
            for choice in request.choices:
                device_class = classes.get(choice.device_class)
                if device_class is None:
                    return (f"ResourceClaim {claim.namespace}/{claim.name}: DeviceClass "
                            f"{choice.device_class!r} does not exist")
                if device_class.unusable is not None:
                    return (f"ResourceClaim {claim.namespace}/{claim.name}: DeviceClass "
                            f"{choice.device_class!r} cannot be used: {device_class.unusable}")
                key = (device_class.name, device_class.selectors, choice.selectors)
                found = memo.get(key)
                if found is None:
                    found = memo[key] = _matching(reachable, device_class, choice)
                if isinstance(found, str):
                    return f"ResourceClaim {claim.namespace}/{claim.name}: {found}"
                matching[(index, choice)] = found
    if len(slots) == 1 and not claims[0].constraints:
        return _one_request(claims[0], slots[0][1], matching, free)
    search = _Search(claims, matching, free)
    try:
        if search.place(slots, 0):
            return search.picked
    except _Exhausted:
        return f"the search for devices stopped after {MAX_STEPS} steps"
    return search.why(slots)


def _one_request(claim: Claim, request: Request,
                 matching: Mapping[tuple[int, Choice], list[Device]],
                 free: Callable[[Device], bool]) -> list[Picked] | str:
    """The common claim, one request and no constraint: its first choice with enough free
    devices, the first of them (what the search would find, without its bookkeeping)."""
    for choice in request.choices:
        devices = matching[(0, choice)]
        if choice.mode == ALL:
            if devices and all(free(d) for d in devices):
                return [Picked(0, choice.name, choice.device_class, d) for d in devices]
            continue
        found = []
        for device in devices:
            if free(device):
                found.append(Picked(0, choice.name, choice.device_class, device))
                if len(found) == choice.count:
                    return found
    wanted = request.choices[0]
    amount = "all" if wanted.mode == ALL else str(wanted.count)
    return (f"ResourceClaim {claim.namespace}/{claim.name}: request {request.name!r} wants "
            f"{amount} device(s) of class {wanted.device_class!r}; too few free ones match")


def _matching(reachable: Sequence[Device], device_class: DeviceClass,
              choice: Choice) -> list[Device] | str:
    try:
        return [d for d in reachable if d.unsupported is None
                and all(matches(e, d) for e in device_class.selectors)
                and all(matches(e, d) for e in choice.selectors)]
    except SelectorError as error:
        return str(error)


class _Search:
    def __init__(self, claims: Sequence[Claim],
                 matching: Mapping[tuple[int, Choice], list[Device]],
                 free: Callable[[Device], bool]) -> None:
        self.claims = claims
        self.matching = matching
        self.free = free
        self.used: set[int] = set()
        self.picked: list[Picked] = []
        self.fixed: dict[tuple[int, int], AttributeValue | Version] = {}
        self.steps = 0

    def place(self, slots: Sequence[tuple[int, Request]], at: int) -> bool:
        if at == len(slots):
            return True
        index, request = slots[at]
        for choice in request.choices:
            devices = self.matching[(index, choice)]
            if choice.mode == ALL:
                if self._take_all(index, choice, devices, slots, at):
                    return True
            elif self._pick(index, choice, devices, 0, choice.count, slots, at):
                return True
        return False

    def _take_all(self, index: int, choice: Choice, devices: Sequence[Device],
                  slots: Sequence[tuple[int, Request]], at: int) -> bool:
        if not devices or any(id(d) in self.used or not self.free(d) for d in devices):
            return False
        undo: list[tuple[int, int]] = []
        for device in devices:
            fixed = self._constrain(index, choice, device)
            if fixed is None:
                self._undo(undo)
                return False
            undo.extend(fixed)
        for device in devices:
            self.used.add(id(device))
            self.picked.append(Picked(index, choice.name, choice.device_class, device))
        if self.place(slots, at + 1):
            return True
        for device in devices:
            self.used.discard(id(device))
            self.picked.pop()
        self._undo(undo)
        return False

    def _pick(self, index: int, choice: Choice, devices: Sequence[Device], start: int,
              left: int, slots: Sequence[tuple[int, Request]], at: int) -> bool:
        if left == 0:
            return self.place(slots, at + 1)
        for position in range(start, len(devices) - left + 1):
            device = devices[position]
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise _Exhausted
            if id(device) in self.used or not self.free(device):
                continue
            fixed = self._constrain(index, choice, device)
            if fixed is None:
                continue
            self.used.add(id(device))
            self.picked.append(Picked(index, choice.name, choice.device_class, device))
            if self._pick(index, choice, devices, position + 1, left - 1, slots, at):
                return True
            self.used.discard(id(device))
            self.picked.pop()
            self._undo(fixed)
        return False

    def _constrain(self, index: int, choice: Choice,
                   device: Device) -> list[tuple[int, int]] | None:
        """The constraints ``device`` fixes (to undo), or None when it breaks one."""
        fixed: list[tuple[int, int]] = []
        for number, constraint in enumerate(self.claims[index].constraints):
            if not (constraint.covers(choice.request) or choice.name in constraint.requests):
                continue
            domain, name = constraint.attribute
            value = device.attributes.get(domain, {}).get(name)
            if value is None:
                self._undo(fixed)
                return None
            key = (index, number)
            if key in self.fixed:
                if self.fixed[key] != value:
                    self._undo(fixed)
                    return None
            else:
                self.fixed[key] = value
                fixed.append(key)
        return fixed

    def _undo(self, fixed: list[tuple[int, int]]) -> None:
        for key in fixed:
            self.fixed.pop(key, None)

    def why(self, slots: Sequence[tuple[int, Request]]) -> str:
        """The first request that has too few free matching devices on its own, or the
        general answer (the requests fit alone, not together or not under the constraints)."""
        for index, claim in enumerate(self.claims):
            for request in claim.requests:
                enough = False
                for choice in request.choices:
                    devices = self.matching[(index, choice)]
                    free = [d for d in devices if self.free(d)]
                    if choice.mode == ALL:
                        enough = enough or (bool(devices) and len(free) == len(devices))
                    else:
                        enough = enough or len(free) >= choice.count
                if not enough:
                    wanted = request.choices[0]
                    amount = "all" if wanted.mode == ALL else str(wanted.count)
                    return (f"ResourceClaim {claim.namespace}/{claim.name}: request "
                            f"{request.name!r} wants {amount} device(s) of class "
                            f"{wanted.device_class!r}; too few free ones match")
        for index, claim in enumerate(self.claims):
            for constraint in claim.constraints:
                domain, name = constraint.attribute
                bound = [d for request in claim.requests for choice in request.choices
                         if constraint.covers(choice.request) or choice.name in constraint.requests
                         for d in self.matching[(index, choice)]]
                if bound and not any(name in d.attributes.get(domain, {}) for d in bound):
                    return (f"ResourceClaim {claim.namespace}/{claim.name}: matchAttribute "
                            f"{domain}/{name}: no matching device has this attribute")
        return "cannot allocate all claims together (their constraints or shared devices)"
