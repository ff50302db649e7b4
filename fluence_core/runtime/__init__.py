"""The in-container runtime: vendor providers and backend selection.

A provider (:mod:`fluence_core.runtime.provider`) has two halves. The
*interceptor* half runs inside the user's container (staged next to
``sitecustomize.py`` by :mod:`fluence_core.hybrid.stage`) and tags every vendor
task with the pod's uid. The *sidecar* half is what
:mod:`fluence_core.hybrid.sidecar` asks to find that task and follow its queue
position. ``fluence select`` ranks backends (:mod:`~fluence_core.runtime.select`)
by their figures (:mod:`~fluence_core.runtime.figures`).
"""

from fluence_core.runtime.provider import Backend, Provider, attributes_from_env, resolve_provider

__all__ = ["Backend", "Provider", "attributes_from_env", "resolve_provider"]
