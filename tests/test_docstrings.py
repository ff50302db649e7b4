"""Product code reads short: module docstrings of a screen at most, and no issue numbers.

A module docstring states the module's contract and why it is so; measurements and
history go stale there and belong in docs/ and commit bodies. An issue number means
nothing to a reader without the tracker, so product code carries none (docs may).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_DOCSTRING_LINES = 25
_ISSUE_REFERENCE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)


def product_modules() -> Iterator[Path]:
    """Every Python module of ``fluence_core`` and of the plugins, their tests left out."""
    trees = [ROOT / "fluence_core", *sorted((ROOT / "plugins").glob("*/"))]
    for tree in trees:
        for path in sorted(tree.rglob("*.py")):
            relative = path.relative_to(tree)
            if "tests" in relative.parts or path.name.startswith("test_") or (
                    path.name == "conftest.py") or ".venv" in relative.parts:
                continue
            yield path


def docstring_lines(source: str) -> int:
    """How many lines the module docstring of ``source`` spans (0 without one)."""
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    return 0 if docstring is None else len(docstring.splitlines())


def issue_references(source: str) -> list[tuple[int, str]]:
    """Each line of ``source`` that cites an issue (``issue 32``, ``issues 20``, ``#31``)."""
    return [(number, match.group(0)) for number, line in enumerate(source.splitlines(), 1)
            for match in _ISSUE_REFERENCE.finditer(line)]


def test_docstring_lines_counts_the_module_docstring_only() -> None:
    source = '"""One.\n\nTwo.\nThree."""\n\ndef f() -> None:\n    """A\n    long\n    one."""\n'
    assert docstring_lines(source) == 4
    assert docstring_lines("x = 1\n") == 0


def test_issue_references_finds_issue_numbers_but_not_counts_or_colours() -> None:
    source = ('"""Refused since issue 32; see Issues #20."""\n'
              'colour = "#7f7f7f"  # the default (10)\nLIMIT = 5  # see #31\n')
    assert issue_references(source) == [(1, "issue 32"), (1, "Issues #20"), (3, "#31")]


def test_the_scan_covers_the_core_and_every_plugin_but_not_their_tests() -> None:
    scanned = {path.relative_to(ROOT).as_posix() for path in product_modules()}
    assert "fluence_core/webhook/transport/server.py" in scanned
    assert "plugins/fluence-flux/fluence_flux/handler.py" in scanned
    assert not any("/tests/" in path for path in scanned)


def test_no_module_docstring_is_longer_than_a_screen() -> None:
    long = [f"{path.relative_to(ROOT)}: {lines} lines" for path in product_modules()
            if (lines := docstring_lines(path.read_text())) > MAX_MODULE_DOCSTRING_LINES]
    assert not long, f"over {MAX_MODULE_DOCSTRING_LINES} lines (move figures and history " \
                     f"to docs/): {long}"


def test_no_issue_number_in_product_code() -> None:
    cited = [f"{path.relative_to(ROOT)}:{number} {text!r}" for path in product_modules()
             for number, text in issue_references(path.read_text())]
    assert not cited, f"issue numbers belong in docs/ and commit bodies: {cited}"
