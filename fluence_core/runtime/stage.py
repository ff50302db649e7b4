"""``fluence stage DIR``: put the interceptor where a user's Python will find it.

The result, with DIR on ``PYTHONPATH``, makes any ``python app.py`` install the
vendor interceptors before the program starts, with nothing changed in the
user's image::

    DIR/sitecustomize.py                 hooks/sitecustomize.py
    DIR/fluence_staged/__init__.py       fluence_core/runtime/boot.py (stdlib only)
    DIR/fluence_staged/names.py          fluence_core/names.py (stdlib only)
    DIR/fluence_staged/manifest.json     which interceptors, and when they apply
    DIR/fluence_staged/interceptors/<provider>.py   each provider's interceptor module

Also runnable as ``python -m fluence_core.runtime.stage DIR``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from fluence_core import names
from fluence_core.errors import FluenceError
from fluence_core.runtime import boot
from fluence_core.runtime.provider import Provider, collect_providers

_HOOKS = Path(__file__).resolve().parents[2] / "hooks" / "sitecustomize.py"


def _source_of(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise FluenceError(f"interceptor module {module!r} is not an importable .py file")
    return Path(spec.origin)


def stage(directory: Path, providers: Iterable[Provider], sitecustomize: Path = _HOOKS) -> dict[str, object]:
    """Write the staged runtime into ``directory`` (created if missing); returns the manifest."""
    if not sitecustomize.is_file():
        raise FluenceError(f"{sitecustomize}: hooks/sitecustomize.py is missing from this install")
    package = directory / names.STAGED_PACKAGE
    interceptors = package / "interceptors"
    interceptors.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sitecustomize, directory / "sitecustomize.py")
    shutil.copyfile(Path(boot.__file__), package / "__init__.py")
    shutil.copyfile(Path(names.__file__), package / "names.py")
    (interceptors / "__init__.py").write_text('"""Vendor interceptors staged by fluence stage."""\n')
    entries = []
    for provider in providers:
        if not provider.interceptor_module:
            continue
        shutil.copyfile(_source_of(provider.interceptor_module), interceptors / f"{provider.name}.py")
        entries.append({
            "name": provider.name,
            "module": f"{names.STAGED_PACKAGE}.interceptors.{provider.name}",
            "match": dict(getattr(provider, "interceptor_match", {}) or {}),
        })
    manifest: dict[str, object] = {"providers": entries}
    (package / boot.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def installed_providers() -> list[Provider]:
    """Every provider the installed plugins contribute."""
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.settings import load_settings

    return collect_providers(get_plugin_manager(load_settings()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fluence_core.runtime.stage", description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    try:
        manifest = stage(args.directory, installed_providers())
    except FluenceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    providers = manifest["providers"]
    assert isinstance(providers, list)
    staged = ", ".join(str(e["name"]) for e in providers) or "no providers"
    print(f"staged {staged} into {args.directory}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
