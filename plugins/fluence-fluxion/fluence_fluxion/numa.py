"""One NUMA zone per pod, as Fluxion can be asked for it.

The core writes a pod that must stay inside one zone as ``slot -> numanode:1 -> core...``
(:func:`fluence_core.matcher.jobspec.compute_jobspec`). Fluxion reads that literally: the
``numanode`` is inside the slot, and everything inside a slot is held exclusively, so the
pod takes the WHOLE zone and no other pod gets the zone's other cores (checked with
``libreapi_cli``: two one-core pods filled a node of two 4-core zones). ``exclusive:
false`` on the ``numanode`` is refused inside a slot ("exclusivity conflicts").

What Fluxion does instead, without being asked: it places a slot at the first vertex
whose own children hold every type the slot asks for (``dfu_impl_t::slot_match``), so
under a node whose zones are loaded (``node -> numanode -> core``) a plain ``slot ->
core`` is found inside ONE zone, and the zone stays shared. :func:`one_zone_jobspec` turns
the core's jobspec into that: the ``numanode`` wrapper is dropped and the slots are held to
the nodes whose zones are loaded (a ``hostlist``), since on a flat node a slot spans.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any, Mapping

from fluence_core.api import NUMA_TYPE


def _one_zone(resource: Mapping[str, Any]) -> bool:
    inner = resource.get("with") or []
    return (resource.get("type") == "slot" and len(inner) == 1
            and inner[0].get("type") == NUMA_TYPE and int(inner[0].get("count", 1)) == 1)


def _asks(resources: list[Mapping[str, Any]]) -> bool:
    """Whether some slot asks for one ``numanode`` (walked without a copy: most do not)."""
    return any(_one_zone(r) or _asks(r.get("with") or []) for r in resources)


def _unwrap(resources: list[dict[str, Any]]) -> None:
    """Drop every slot's ``numanode:1`` wrapper, in place."""
    for resource in resources:
        if _one_zone(resource):
            resource["with"] = resource["with"][0].get("with") or []
        else:
            _unwrap(resource.get("with") or [])


def one_zone_jobspec(jobspec: Mapping[str, Any], zoned: Collection[str]) -> Mapping[str, Any]:
    """The jobspec as Fluxion keeps its slots in one zone each: itself when no slot asks
    for one ``numanode``; else a copy without that wrapper, held to the ``zoned`` nodes."""
    if not _asks(list(jobspec.get("resources") or [])):
        return jobspec
    changed = copy.deepcopy(dict(jobspec))
    _unwrap(changed.get("resources") or [])
    system = changed.setdefault("attributes", {}).setdefault("system", {})
    hosts = {"hostlist": sorted(zoned)}
    before = system.get("constraints")
    system["constraints"] = {"and": [before, hosts]} if before else hosts
    return changed
