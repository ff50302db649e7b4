"""``fluence stage DIR``: put the interceptor where a user's Python will find it.

The result, with DIR on ``PYTHONPATH``, makes any ``python app.py`` install the
vendor interceptors before the program starts, with nothing changed in the
user's image::

    DIR/sitecustomize.py                 fluence_core/hybrid/hooks/sitecustomize.py
    DIR/fluence_staged/__init__.py       fluence_core/hybrid/boot.py (stdlib only)
    DIR/fluence_staged/names.py          fluence_core/names.py (stdlib only)
    DIR/fluence_staged/manifest.json     which interceptors, and when they apply
    DIR/fluence_staged/interceptors/<provider>.py   each provider's interceptor module

Every file is read through :mod:`importlib.resources`, so staging works from an
installed wheel exactly as from a checkout.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from fluence_core import names
from fluence_core.errors import FluenceError
from fluence_core.hybrid import boot
from fluence_core.runtime.provider import Provider, collect_providers

SITECUSTOMIZE: Traversable = files("fluence_core.hybrid").joinpath("hooks", "sitecustomize.py")
"""The interpreter-start hook, shipped as package data of ``fluence_core.runtime``."""


def _source_of(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise FluenceError(f"interceptor module {module!r} is not an importable .py file")
    return Path(spec.origin)


def _module_source(module: str) -> Traversable:
    """The source of one of Fluence's own stdlib-only modules, as the install holds it."""
    package, _, name = module.rpartition(".")
    return files(package).joinpath(f"{name}.py")


def _copy(source: Traversable, target: Path) -> None:
    if not source.is_file():
        raise FluenceError(f"{source}: a runtime file is missing from this install of fluence-core")
    target.write_bytes(source.read_bytes())


def stage(directory: Path, providers: Iterable[Provider],
          sitecustomize: Traversable = SITECUSTOMIZE) -> dict[str, object]:
    """Write the staged runtime into ``directory`` (created if missing); returns the manifest."""
    package = directory / names.STAGED_PACKAGE
    interceptors = package / "interceptors"
    try:
        interceptors.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FluenceError(f"{directory}: cannot create the staging directory: {error}") from None
    _copy(sitecustomize, directory / "sitecustomize.py")
    _copy(_module_source(boot.__name__), package / "__init__.py")
    _copy(_module_source(names.__name__), package / "names.py")
    (interceptors / "__init__.py").write_text('"""Interceptors staged by fluence stage."""\n')
    entries = []
    for provider in providers:
        if not provider.interceptor_module:
            continue
        (interceptors / f"{provider.name}.py").write_bytes(
            _source_of(provider.interceptor_module).read_bytes())
        entries.append({
            "name": provider.name,
            "module": f"{names.STAGED_PACKAGE}.interceptors.{provider.name}",
            "match": dict(provider.interceptor_match),
        })
    manifest: dict[str, object] = {"providers": entries}
    (package / boot.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def installed_providers() -> list[Provider]:
    """Every provider the installed plugins contribute."""
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.settings import load_settings

    return collect_providers(get_plugin_manager(load_settings()))
