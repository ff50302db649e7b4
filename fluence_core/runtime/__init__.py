"""The in-container runtime: vendor providers, staging, the sidecar, backend selection.

Two halves live here. The *interceptor* half runs inside the user's container
(staged next to ``sitecustomize.py`` by :mod:`fluence_core.runtime.stage`) and
tags every vendor task with the pod's uid. The *sidecar* half
(:mod:`fluence_core.runtime.sidecar`) finds that task, watches its queue
position and ungates the group's workers at the right moment.
"""

from fluence_core.runtime.provider import Backend, Provider, attributes_from_env, resolve_provider

__all__ = ["Backend", "Provider", "attributes_from_env", "resolve_provider"]
