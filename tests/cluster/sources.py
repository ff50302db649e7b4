"""A digest of the sources Fluence's image is built from, to tell a stale image.

The cluster tier runs the image ``tests/cluster/images.sh`` built, with the manifests
and tests of the tree it runs from. Once the code changes, the two disagree (a webhook
image older than its manifest's probe port crash-loops), and the tier would report the
mismatch as a failure of whatever it tests first. ``images.sh`` labels the image with
this digest and keeps it beside the archive; the tier skips, naming the fix, when the
tree's digest differs.

Standard library only: ``images.sh`` runs it with the host's python3 (``python3
tests/cluster/sources.py`` prints the digest).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
PARTS = ("Containerfile", "pyproject.toml", "fluence_core", "plugins")
"""What the image's wheels are built from (the plugins' tests aside)."""


SKIPPED = ("__pycache__", ".egg-info", "/build/", "/dist/")
"""Never in the image (.dockerignore), for a tree that is not a git checkout."""


def _files(repo: Path) -> list[str]:
    """The tracked files of :data:`PARTS`; outside a git checkout, every file there."""
    try:
        listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--", *PARTS],
                                capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        listed = [str(path.relative_to(repo)) for part in PARTS
                  for path in [repo / part, *(repo / part).rglob("*")] if path.is_file()]
        listed = [n for n in listed if not any(s in f"/{n}" for s in SKIPPED)]
    return sorted(n for n in listed if n and "/tests/" not in n)


def digest(repo: Path = REPO) -> str:
    """SHA-256 over the files of :data:`PARTS` (the plugins' tests aside), as they are in
    the work tree, committed or not."""
    sha = hashlib.sha256()
    for name in _files(repo):
        path = repo / name
        sha.update(name.encode() + b"\0")
        sha.update(path.read_bytes() if path.is_file() else b"<absent>")
        sha.update(b"\0")
    return sha.hexdigest()


if __name__ == "__main__":
    sys.stdout.write(digest() + "\n")
