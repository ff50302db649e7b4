"""The CDI specs the kubelet plugin writes: one file per prepared claim.

A container runtime with CDI enabled (containerd 1.7 and later, CRI-O) reads
every spec in its CDI directory and applies the edits of the devices a container
is given. A claim's spec holds one CDI device per allocated QPU device whose
only edit is the environment: ``FLUXION_BACKEND`` and ``FLUXION_<KEY>``, what
the webhook injects for the extended resource. The file is named after the
claim's uid, so preparing again rewrites it and unpreparing removes exactly it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from fluence_core.api import names

CDI_VERSION = "0.6.0"
SPEC_PREFIX = "fluence-qpu-"


def spec_path(cdi_dir: Path, claim_uid: str) -> Path:
    return cdi_dir / f"{SPEC_PREFIX}{claim_uid}.json"


def device_id(name: str) -> str:
    """The fully qualified CDI device a container is given: ``<kind>=<name>``."""
    return f"{names.QPU_CDI_KIND}={name}"


def write_spec(cdi_dir: Path, claim_uid: str,
               devices: Sequence[tuple[str, Mapping[str, str]]]) -> Path:
    """Write the claim's spec (``(cdi device name, env)`` per device) atomically: a
    runtime reading the directory meanwhile sees the old file or the new, never half."""
    cdi_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "cdiVersion": CDI_VERSION,
        "kind": names.QPU_CDI_KIND,
        "devices": [
            {"name": name,
             "containerEdits": {"env": [f"{key}={value}" for key, value in env.items()]}}
            for name, env in devices
        ],
    }
    path = spec_path(cdi_dir, claim_uid)
    handle, temporary = tempfile.mkstemp(dir=cdi_dir, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(spec, out, indent=2)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def remove_spec(cdi_dir: Path, claim_uid: str) -> bool:
    """Remove the claim's spec; False when there was none (already unprepared)."""
    try:
        spec_path(cdi_dir, claim_uid).unlink()
    except FileNotFoundError:
        return False
    return True
