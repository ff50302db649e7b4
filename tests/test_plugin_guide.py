"""docs/plugins.md, the plugin author's guide, keeps up with the hooks and the tree."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from fluence_core import hookspecs

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "plugins.md"
HOOKS = sorted(name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
               if name.startswith("fluence_"))


def sections() -> dict[str, str]:
    """Each ``### heading`` of the guide with the text up to the next heading."""
    parts = re.split(r"^#{2,3} ", GUIDE.read_text(), flags=re.MULTILINE)
    return {part.split("\n", 1)[0].strip(): part for part in parts[1:]}


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_section(hook: str) -> None:
    assert hook in sections(), f"docs/plugins.md has no '### {hook}' section"


@pytest.mark.parametrize("hook", HOOKS)
def test_each_section_gives_the_hooks_signature(hook: str) -> None:
    shown = re.search(rf"def {hook}\((.*?)\)", sections().get(hook, ""))
    assert shown, f"the '{hook}' section shows no 'def {hook}(...)'"
    wanted = list(inspect.signature(getattr(hookspecs, hook)).parameters)
    assert re.findall(r"(\w+):", shown.group(1)) == wanted, (
        f"the '{hook}' section's signature is not ({', '.join(wanted)})")


@pytest.mark.parametrize("hook", HOOKS)
def test_each_section_says_whether_the_first_answer_wins(hook: str) -> None:
    first = bool(getattr(hookspecs, hook).fluence_spec["firstresult"])
    text = sections().get(hook, "")
    said = "First answer wins" in text
    assert said == first, f"the '{hook}' section says {'not ' * first}that the first answer wins"


def test_every_path_the_guide_names_exists() -> None:
    paths = r"`((?:fluence_core|plugins|examples|docs)/[\w./-]+)`"
    named = set(re.findall(paths, GUIDE.read_text()))
    assert named, "the guide names no file to copy"
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert not missing, f"docs/plugins.md names files that do not exist: {missing}"
