"""Fluence: a Fluxion-style graph scheduler for HPC and hybrid quantum-classical work.

Plugins import :data:`hookimpl` from here to implement the hooks declared in
:mod:`fluence_core.hookspecs`.
"""

from __future__ import annotations

import pluggy

from fluence_core import names

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker(names.ENTRY_POINT_GROUP)
"""Marker for implementations of Fluence hooks."""

__all__ = ["__version__", "hookimpl"]
