"""The import-linter contracts name every module of the packages they order or fence.

``lint-imports`` checks only the modules a ``layers`` contract names: a module added to
``fluence_core/matcher/`` and left out of the matcher's contract is checked by nothing,
and ``docs/architecture.md``, which restates the contracts, misses it too. So every
module and subpackage of a contract's container must sit on one of its layers, or be
listed here with the reason it is outside.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
    "contracts"]

OUTSIDE = {
    "fluence_core": {
        "limits": "input bounds, importing nothing of Fluence: any layer may use them",
        "yamlfile": "imports only limits and errors (docs/architecture.md says so)",
        "testing_apiserver": "wires the scheduler and the webhook together for tests",
    },
}
"""Container -> module -> why no layer names it."""


def _layered() -> list[dict[str, object]]:
    return [c for c in CONTRACTS if c["type"] == "layers"]


def modules_of(container: str) -> set[str]:
    """The modules and subpackages directly inside ``container`` (a dotted package)."""
    folder = ROOT.joinpath(*container.split("."))
    found = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    found |= {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    return found


def named_in(contract: dict[str, object]) -> set[str]:
    layers = contract["layers"]
    assert isinstance(layers, list)
    return {name.strip() for layer in layers for name in str(layer).split("|")}


def test_there_are_layer_contracts_to_check() -> None:
    assert {c["containers"][0] for c in _layered()} >= {  # type: ignore[index]
        "fluence_core", "fluence_core.matcher", "fluence_core.kube", "fluence_core.hybrid",
        "fluence_core.webhook"}


@pytest.mark.parametrize("contract", _layered(), ids=lambda c: str(c["containers"]))
def test_each_layer_contract_names_every_module_of_its_container(
        contract: dict[str, object]) -> None:
    containers = contract["containers"]
    assert isinstance(containers, list)
    for container in containers:
        outside = OUTSIDE.get(container, {})
        unnamed = modules_of(container) - named_in(contract) - set(outside)
        assert not unnamed, (f"{sorted(unnamed)} of {container} are on no layer of "
                             f"{contract['name']!r}: add them (and to docs/architecture.md)")
        stale = (set(outside) | named_in(contract)) - modules_of(container)
        assert not stale, f"{sorted(stale)} are named for {container} but do not exist"


def test_modules_of_sees_modules_and_subpackages_but_not_plain_folders() -> None:
    found = modules_of("fluence_core.hybrid")
    assert {"split", "release"} <= found  # modules
    assert "hooks" not in found  # staged files, not a package
    assert "scoring" in modules_of("fluence_core.feasibility")  # a subpackage


ROOMS_CONTRACT = ("webhook: the process over admission over its controller, the HTTPS "
                  "transport below all")


def test_the_webhook_transport_is_on_the_bottom_layer_of_the_webhook_rooms() -> None:
    # The HTTPS server serves any endpoint and knows nothing of admission: on the bottom
    # layer it may import no other room (modules sharing a layer are independent too),
    # however many modules admission and its handlers grow.
    (contract,) = [c for c in CONTRACTS if c["name"] == ROOMS_CONTRACT]
    layers = contract["layers"]
    assert isinstance(layers, list)
    bottom = {name.strip() for name in str(layers[-1]).split("|")}
    assert "transport" in bottom
    assert {"admission", "controller"} <= named_in(contract) - bottom
