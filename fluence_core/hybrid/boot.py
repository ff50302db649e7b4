"""Interpreter-start boot of the staged interceptors (standard library only).

``fluence stage`` copies this file as ``fluence_staged/__init__.py`` into a
directory the user's container puts on ``PYTHONPATH``; ``sitecustomize.py``
calls :func:`boot` before the user's program starts. It reads the pod uid and
the ``FLUXION_*`` attributes from the environment, and installs every staged
interceptor whose match fits. It never raises and never imports Fluence's own
dependencies: the user's image has none of them.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Mapping

MANIFEST = "manifest.json"
_POD_UID_ENV = "FLUENCE_POD_UID"
_LOG_LEVEL_ENV = "FLUENCE_LOG_LEVEL"
_ATTR_PREFIX = "FLUXION_"

installed: dict[str, bool] = {}
"""What the last :func:`boot` did, by provider name (for the curious and for tests)."""


def _debug(message: str) -> None:
    if os.environ.get(_LOG_LEVEL_ENV, "").upper() == "DEBUG":
        sys.stderr.write(f"[fluence] {message}\n")


def _attributes(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        key[len(_ATTR_PREFIX):].lower(): value
        for key, value in environ.items()
        if key.startswith(_ATTR_PREFIX) and len(key) > len(_ATTR_PREFIX)
    }


def _fits(match: Mapping[str, str], attributes: Mapping[str, str]) -> bool:
    """No chosen attributes at all: install everything (tagging is harmless).
    Otherwise every key of ``match`` the attributes carry must agree."""
    if not attributes:
        return True
    return all(attributes.get(key, value) == value for key, value in match.items())


def boot(environ: Mapping[str, str] | None = None) -> dict[str, bool]:
    """Install the staged interceptors that fit this pod; returns name -> installed."""
    installed.clear()
    try:
        environ = os.environ if environ is None else environ
        pod_uid = environ.get(_POD_UID_ENV, "")
        if not pod_uid:
            _debug(f"{_POD_UID_ENV} is not set: no interceptor installed")
            return dict(installed)
        manifest = json.loads((Path(__file__).parent / MANIFEST).read_text())
        attributes = _attributes(environ)
        for entry in manifest.get("providers", []):
            name = entry["name"]
            if not _fits(entry.get("match", {}), attributes):
                continue
            try:
                module = importlib.import_module(entry["module"])
                installed[name] = bool(module.install_interceptor(pod_uid))
            except Exception as error:  # one vendor's trouble must not stop another's
                installed[name] = False
                _debug(f"interceptor {name} failed: {error}")
            _debug(f"interceptor {name}: {'installed' if installed[name] else 'not installed'}")
    except Exception as error:  # the user's program always runs
        _debug(f"boot failed: {error}")
    return dict(installed)
