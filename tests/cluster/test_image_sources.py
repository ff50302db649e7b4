"""The image's source digest changes with the code in the image, and only with it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cluster import sources


def _repo(tmp_path: Path) -> Path:
    for name, text in {"Containerfile": "FROM x\n", "pyproject.toml": "[project]\n",
                       "fluence_core/core.py": "A = 1\n",
                       "plugins/p/p/plugin.py": "B = 1\n",
                       "plugins/p/tests/test_p.py": "def test(): ...\n",
                       "README.md": "docs\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    return tmp_path


def test_editing_code_in_the_image_changes_the_digest_even_before_a_commit(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = sources.digest(repo)
    assert sources.digest(repo) == before
    (repo / "fluence_core/core.py").write_text("A = 2\n")
    assert sources.digest(repo) != before
    (repo / "fluence_core/core.py").write_text("A = 1\n")
    (repo / "plugins/p/p/plugin.py").write_text("B = 2\n")
    assert sources.digest(repo) != before


def test_tests_docs_and_untracked_files_leave_it_alone(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = sources.digest(repo)
    (repo / "plugins/p/tests/test_p.py").write_text("def test(): assert True\n")
    (repo / "README.md").write_text("more docs\n")
    (repo / "fluence_core/scratch.py").write_text("untracked\n")
    assert sources.digest(repo) == before


def test_a_tree_that_is_not_a_git_checkout_gets_a_digest_of_its_files(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    (repo / "fluence_core/__pycache__").mkdir()
    (repo / "fluence_core/__pycache__/core.pyc").write_bytes(b"\0")
    before = sources.digest(repo)
    (repo / "fluence_core/__pycache__/core.pyc").write_bytes(b"\1")
    assert sources.digest(repo) == before
    (repo / "fluence_core/core.py").write_text("A = 2\n")
    assert sources.digest(repo) != before
