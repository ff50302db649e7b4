"""The README's table of ``Provider`` members keeps up with the protocol.

A provider author reads the README to learn what to implement. The table must name
every public member of :class:`~fluence_core.api.Provider`, call each abstract method
required, and call optional only what has a default.
"""

from __future__ import annotations

import re
from pathlib import Path

from fluence_core.api import Provider

README = Path(__file__).resolve().parents[1] / "README.md"
ROW = re.compile(r"^\| `(\w+)` \| (required|optional) \|", re.MULTILINE)


def table(text: str) -> dict[str, str]:
    """``member -> required | optional`` from the README's rows."""
    return dict(ROW.findall(text))


def protocol_members() -> set[str]:
    return {name for name in vars(Provider) if not name.startswith("_")}


def test_table_reads_the_rows_of_a_member_table() -> None:
    text = ("| member | | what |\n|---|---|---|\n"
            "| `matches` | required | x |\n| `refresh` | optional | y |\n")
    assert table(text) == {"matches": "required", "refresh": "optional"}


def test_the_table_names_every_member_of_the_protocol_and_nothing_else() -> None:
    rows = table(README.read_text())
    assert set(rows) == protocol_members(), (
        f"missing from the README: {sorted(protocol_members() - set(rows))}; "
        f"not in Provider: {sorted(set(rows) - protocol_members())}")


def test_every_abstract_method_is_required_and_every_optional_one_has_a_default() -> None:
    rows = table(README.read_text())
    abstract = set(Provider.__abstractmethods__)
    assert abstract, "Provider has no abstract method: the check would prove nothing"
    assert {name for name in abstract if rows.get(name) != "required"} == set()
    assert {name for name, kind in rows.items() if kind == "optional"} & abstract == set()


def test_the_job_record_section_names_the_file_names_py_defines() -> None:
    from fluence_core.api import names

    assert f"`{names.JOB_RECORD_FILE}`" in README.read_text()
    assert f"`{names.RUNTIME_MOUNT}`" in README.read_text()
