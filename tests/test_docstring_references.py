"""Every cross-reference in the core's docstrings names something that exists.

Modules moved into packages (``matcher/``, ``kube/``, ``hybrid/``) and relative
references such as ``:mod:`.controller``` kept pointing at the old neighbours: the
reader was sent to a module that is not there. Each ``:mod:``, ``:func:``,
``:class:``, ``:data:``, ``:meth:``, ``:attr:`` or ``:exc:`` reference to Fluence
(relative, or starting ``fluence_core``) must import and resolve.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_REFERENCE = re.compile(r":(?:mod|func|class|data|meth|attr|exc):`~?((?:\.|fluence_core\.)[\w.]*)`")


def _package_of(path: Path) -> str:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return module.removesuffix(".__init__") if path.name == "__init__.py" else (
        module.rsplit(".", 1)[0])


def absolute(reference: str, package: str) -> str:
    """``reference`` made absolute from the package of the module it is written in."""
    if not reference.startswith("."):
        return reference
    dots = len(reference) - len(reference.lstrip("."))
    base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
    return f"{base}.{reference.lstrip('.')}"


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or a name reachable from one (a class's fields
    included: pydantic and dataclass fields are not class attributes)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            fields = {**getattr(found, "model_fields", {}),
                      **getattr(found, "__dataclass_fields__", {}),
                      **getattr(found, "__annotations__", {})} if isinstance(found, type) else {}
            if hasattr(found, name):
                found = getattr(found, name)
            elif name in fields:
                return name == parts[-1]
            else:
                return False
        return True
    return False


def test_absolute_reads_relative_references_from_the_writers_package() -> None:
    assert absolute(".controller", "fluence_core.webhook") == "fluence_core.webhook.controller"
    assert absolute("..kube.meta", "fluence_core.webhook") == "fluence_core.kube.meta"
    assert absolute("fluence_core.names", "fluence_core.hybrid") == "fluence_core.names"


def test_resolves_knows_modules_names_and_fields_but_not_what_moved() -> None:
    assert resolves("fluence_core.kube.meta.metadata_of")
    assert resolves("fluence_core.settings.SettingsVariables.report_port")  # a pydantic field
    assert not resolves("fluence_core.hybrid.controller")
    assert not resolves("fluence_core.kube.meta.no_such_reader")


def test_every_reference_in_the_cores_docstrings_resolves() -> None:
    broken = []
    for path in sorted((ROOT / "fluence_core").rglob("*.py")):
        package = _package_of(path)
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for reference in _REFERENCE.findall(line):
                if not resolves(absolute(reference.rstrip("."), package)):
                    broken.append(f"{path.relative_to(ROOT)}:{number} {reference}")
    assert not broken, broken
