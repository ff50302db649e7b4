"""The devices DRA drivers publish, read from ResourceSlices as kube-scheduler reads them.

A driver publishes its devices in *pools*, each spread over one or more
ResourceSlices. Only the slices of a pool's newest ``pool.generation`` count,
and a pool is *complete* only when ``pool.resourceSliceCount`` slices of that
generation are there: a driver rewriting its pool publishes the new slices one
by one, and allocating from half a pool could hand out a device that is about
to disappear. kube-scheduler allocates from complete pools only; so does this
inventory, which keeps the incomplete ones aside so ``fluence status`` can say
why their devices are not offered.

Where a device is reachable from comes from its slice (or from the device itself
with ``perDeviceNodeSelection``): ``nodeName`` (node-local, under that node),
``allNodes`` or a ``nodeSelector`` (network-attached, above the nodes it
selects). Attribute names are qualified as Kubernetes qualifies them: a name
without a domain belongs to the driver's, so ``model`` of driver
``gpu.example.com`` is ``device.attributes["gpu.example.com"].model``.

Devices that need what Fluence does not model yet (binding conditions, shared
counters of partitionable devices, taints, multiple allocations) are kept with
the reason and never offered, so they are never allocated wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, TypeAlias

from fluence_core.dra.shape import list_at, object_at
from fluence_core.feasibility.selectors import NodeSelector, SelectorError
from fluence_core.kube.api import KubeObject
from fluence_core.kube.meta import metadata_of
from fluence_core.log import logger
from fluence_core.quantity import QuantityError, parse_quantity

AttributeValue: TypeAlias = bool | int | str
"""A device attribute: ``bool``, ``int``, ``string``; a ``version`` is kept as its text."""


@dataclass(frozen=True, slots=True, order=True)
class DeviceId:
    """A device's name in an allocation result: driver, pool and device."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class Version:
    """A ``version`` attribute (semantic versioning), compared by its numbers."""

    text: str

    def key(self) -> tuple[int, int, int, int, str]:
        core, _, pre = self.text.lstrip("v").partition("-")
        numbers = [int(p) if p.isdigit() else 0 for p in core.split("+")[0].split(".")]
        numbers += [0] * (3 - len(numbers))
        # a release ranks above its pre-releases
        return numbers[0], numbers[1], numbers[2], 0 if pre else 1, pre


@dataclass(frozen=True, eq=False)
class Device:
    """One device, as its slice published it, and where it can be reached from."""

    id: DeviceId
    attributes: Mapping[str, Mapping[str, AttributeValue | Version]]
    """Domain -> attribute name -> value (names qualified as the module docstring says)."""
    capacity: Mapping[str, Mapping[str, Fraction]]
    """Domain -> capacity name -> exact quantity."""
    node: str | None = None
    """Its node, for a node-local device."""
    all_nodes: bool = False
    node_selector: NodeSelector | None = None
    raw_selector: Mapping[str, Any] | None = None
    """The selector as published: written into an allocation that uses the device."""
    unsupported: str | None = None
    """Why Fluence does not allocate it (a feature it does not model yet), or None."""
    verdicts: dict[str, bool | str] = field(default_factory=dict, repr=False, compare=False)
    """CEL results by expression (:mod:`fluence_core.dra.cel`): a device is immutable, so
    each selector is evaluated once per device."""
    selector_view: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The device as a selector's ``device`` variable sees it, built once."""

    @property
    def network_attached(self) -> bool:
        return self.node is None

    def reachable_from(self, node: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod on ``node`` (with ``labels``) can use this device."""
        if self.node is not None:
            return self.node == node
        if self.all_nodes:
            return True
        return self.node_selector is not None and self.node_selector.matches(node, labels)

    def where(self) -> str:
        """Where it is reachable from, for people."""
        if self.node is not None:
            return self.node
        return "all nodes" if self.all_nodes else "selected nodes"


@dataclass(frozen=True)
class Pool:
    """A driver's pool at its newest generation."""

    driver: str
    name: str
    generation: int
    expected: int
    """``resourceSliceCount``: slices of this generation the pool is made of."""
    seen: int

    @property
    def complete(self) -> bool:
        return self.seen >= self.expected


def qualify(name: str, driver: str) -> tuple[str, str]:
    """``(domain, name)`` of an attribute or capacity name (unqualified: the driver's)."""
    domain, slash, rest = name.rpartition("/")
    return (domain, rest) if slash else (driver, name)


INT64: Final = range(-(2**63), 2**63)

SEMVER: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?")
"""A ``version`` attribute as the API server accepts it: semantic versioning 2.0.0."""


def _attribute(raw: Any, where: str) -> AttributeValue | Version:
    """One attribute, checked as the API server checks it: an ``int`` past int64 or a
    ``version`` that is not semantic versioning never reaches a selector, which would fail
    on that device and so for every claim that looks at the node."""
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ValueError(f"{where}: expected exactly one of bool, int, string, version")
    (kind, value), = raw.items()
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        if value not in INT64:
            raise ValueError(f"{where}: int={value} is out of int64")
        return value
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "version" and isinstance(value, str):
        if not SEMVER.fullmatch(value):
            raise ValueError(f"{where}: {value!r} is not a semantic version")
        return Version(value)
    raise ValueError(f"{where}: {kind}={value!r} is not a device attribute")


def _unsupported(raw: Mapping[str, Any]) -> str | None:
    if raw.get("bindingConditions"):
        return "it has binding conditions"
    if raw.get("consumesCounters"):
        return "it consumes shared counters (a partitionable device)"
    if raw.get("taints"):
        return "it is tainted"
    if raw.get("allowMultipleAllocations"):
        return "it allows multiple allocations (consumable capacity)"
    return None


def read_devices(slice_obj: KubeObject) -> list[Device]:
    """The devices of one ResourceSlice; ValueError names what is malformed and where."""
    name = metadata_of(slice_obj).get("name", "?")
    spec = slice_obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError(f"ResourceSlice {name}: no spec")
    driver = spec.get("driver")
    pool = (spec.get("pool") or {}).get("name")
    if not isinstance(driver, str) or not driver or not isinstance(pool, str) or not pool:
        raise ValueError(f"ResourceSlice {name}: spec.driver and spec.pool.name are required")
    per_device = bool(spec.get("perDeviceNodeSelection"))
    devices = []
    listed = list_at(spec.get("devices"), f"ResourceSlice {name}: spec.devices")
    for index, raw in enumerate(listed):
        where = f"ResourceSlice {name}: spec.devices[{index}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise ValueError(f"{where}: a device needs a name")
        attributes: dict[str, dict[str, AttributeValue | Version]] = {}
        for key, value in object_at(raw.get("attributes"), f"{where}.attributes").items():
            domain, short = qualify(str(key), driver)
            attributes.setdefault(domain, {})[short] = _attribute(
                value, f"{where}.attributes[{key}]")
        capacity: dict[str, dict[str, Fraction]] = {}
        for key, value in object_at(raw.get("capacity"), f"{where}.capacity").items():
            domain, short = qualify(str(key), driver)
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}.capacity[{key}]: {value!r:.60} is not an object "
                                 "with a value")
            try:
                amount = parse_quantity(str(value.get("value")))
            except QuantityError as error:
                raise ValueError(f"{where}.capacity[{key}]: {error}") from None
            capacity.setdefault(domain, {})[short] = amount
        source = raw if per_device else spec
        placements = [k for k in ("nodeName", "nodeSelector", "allNodes") if source.get(k)]
        if len(placements) > 1:
            raise ValueError(f"{where if per_device else f'ResourceSlice {name}: spec'}: "
                             f"{' and '.join(placements)} are set; exactly one of nodeName, "
                             "nodeSelector and allNodes must be")
        node = source.get("nodeName") or None
        raw_selector = source.get("nodeSelector")
        try:
            selector = (NodeSelector.parse(raw_selector, f"{where}.nodeSelector")
                        if raw_selector is not None else None)
        except SelectorError as error:
            raise ValueError(str(error)) from None
        devices.append(Device(
            DeviceId(driver, pool, raw["name"]), attributes, capacity, node=node,
            all_nodes=bool(source.get("allNodes")), node_selector=selector,
            raw_selector=raw_selector, unsupported=_unsupported(raw)))
    return devices


def _pool_of(spec: Any) -> tuple[tuple[str, str], int, int]:
    """A slice's (driver, pool name), generation and ``resourceSliceCount``; ValueError
    when they are not what the API server requires. A count of 0 or less would make a
    pool complete with no slice at all, and a count taken from a string would be a guess."""
    if not isinstance(spec, Mapping):
        raise ValueError("spec is not an object")
    pool = spec.get("pool")
    if not isinstance(pool, Mapping):
        raise ValueError("spec.pool is not an object")
    generation, count = pool.get("generation"), pool.get("resourceSliceCount")
    generation = 0 if generation is None else generation
    count = 1 if count is None else count
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        raise ValueError(f"spec.pool.generation {generation!r} is not a non-negative integer")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"spec.pool.resourceSliceCount {count!r} is not a positive integer")
    return (str(spec.get("driver")), str(pool.get("name"))), generation, count


@dataclass
class Inventory:
    """Every ResourceSlice as the watch last showed it, and the devices that count."""

    slices: dict[str, KubeObject] = field(default_factory=dict)
    _devices: list[Device] | None = None
    _pools: dict[tuple[str, str], Pool] = field(default_factory=dict)
    _parsed: dict[str, tuple[str, list[Device]]] = field(default_factory=dict)
    """Slice name -> (resourceVersion, its devices): a slice is read once per version."""

    def put(self, slice_obj: KubeObject) -> None:
        self.slices[str(metadata_of(slice_obj).get("name"))] = slice_obj
        self._devices = None

    def remove(self, name: str) -> None:
        self.slices.pop(name, None)
        self._parsed.pop(name, None)
        self._devices = None

    def replace(self, slices: Iterable[KubeObject]) -> None:
        self.slices = {str(metadata_of(s).get("name")): s for s in slices}
        self._devices = None

    @property
    def pools(self) -> Mapping[tuple[str, str], Pool]:
        self.devices()
        return self._pools

    def devices(self) -> list[Device]:
        """The devices of complete pools at their newest generation (duplicates dropped)."""
        if self._devices is not None:
            return self._devices
        newest: dict[tuple[str, str], tuple[int, int, list[KubeObject]]] = {}
        for name, slice_obj in self.slices.items():
            try:
                key, generation, count = _pool_of(slice_obj.get("spec"))
            except ValueError as error:
                logger.error("ResourceSlice %s is left out: its pool cannot be read (%s)",
                             name, error)
                continue
            found = newest.get(key)
            if found is None or generation > found[0]:
                newest[key] = (generation, count, [slice_obj])
            elif generation == found[0]:
                found[2].append(slice_obj)
        devices: list[Device] = []
        self._pools = {}
        for (driver, pool_name), (generation, count, slices) in sorted(newest.items()):
            pool = Pool(driver, pool_name, generation, count, len(slices))
            self._pools[(driver, pool_name)] = pool
            if not pool.complete:
                continue
            seen: set[str] = set()
            for slice_obj in slices:
                for device in self._read(slice_obj):
                    if device.id.device in seen:
                        logger.warning("pool %s/%s publishes device %s twice; the first counts",
                                       driver, pool_name, device.id.device)
                        continue
                    seen.add(device.id.device)
                    devices.append(device)
        self._devices = devices
        return devices

    def _read(self, slice_obj: KubeObject) -> list[Device]:
        metadata = metadata_of(slice_obj)
        name, version = str(metadata.get("name")), str(metadata.get("resourceVersion", ""))
        cached = self._parsed.get(name)
        if cached is not None and cached[0] == version and version:
            return cached[1]
        try:
            devices = read_devices(slice_obj)
        except (ValueError, TypeError, AttributeError) as error:
            logger.error("ResourceSlice %s is left out: %s", name,
                         str(error).removeprefix(f"ResourceSlice {name}: "))
            devices = []
        self._parsed[name] = (version, devices)
        return devices
