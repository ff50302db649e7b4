"""The cffi declaration of flux-sched's ``reapi_cli`` C API (ABI mode).

Only the calls Fluence uses are declared. Enum values come from flux-sched's
``match_op.h`` and ``resource_status.h``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cffi

CDEF = """
typedef struct reapi_cli_ctx reapi_cli_ctx_t;
typedef enum match_op_t {
    MATCH_UNKNOWN, MATCH_ALLOCATE, MATCH_ALLOCATE_W_SATISFIABILITY,
    MATCH_ALLOCATE_ORELSE_RESERVE, MATCH_SATISFIABILITY, MATCH_WITHOUT_ALLOCATING,
    MATCH_WITHOUT_ALLOCATING_FUTURE, END_MATCH_OP_T
} match_op_t;
typedef enum resource_status_t { RESOURCE_UP = 0, RESOURCE_DOWN = 1 } resource_status_t;

reapi_cli_ctx_t *reapi_cli_new (void);
void reapi_cli_destroy (reapi_cli_ctx_t *ctx);
int reapi_cli_initialize (reapi_cli_ctx_t *ctx, const char *rgraph, const char *options);
int reapi_cli_match_with_jobid (reapi_cli_ctx_t *ctx, match_op_t match_op, const char *jobspec,
                                uint64_t jobid, bool *reserved, char **R, int64_t *at, double *ov);
int reapi_cli_match_satisfy (reapi_cli_ctx_t *ctx, const char *jobspec, bool *sat, double *ov);
int reapi_cli_update_allocate (reapi_cli_ctx_t *ctx, const uint64_t jobid, const char *R,
                               int64_t *at, double *ov, const char **R_out);
int reapi_cli_cancel (reapi_cli_ctx_t *ctx, const uint64_t jobid, bool noent_ok);
int reapi_cli_info (reapi_cli_ctx_t *ctx, const uint64_t jobid, char **mode, bool *reserved,
                    int64_t *at, double *ov);
const char *reapi_cli_get_err_msg (reapi_cli_ctx_t *ctx);
void reapi_cli_clear_err_msg (reapi_cli_ctx_t *ctx);
int reapi_cli_set_status (reapi_cli_ctx_t *ctx, const char *resource_path,
                          resource_status_t status);

void free (void *ptr);
"""

ffi = cffi.FFI()
ffi.cdef(CDEF)

_CANDIDATES = ("lib/flux/libreapi_cli.so", "lib/libreapi_cli.so", "lib64/flux/libreapi_cli.so")


PREFIXES: tuple[str, ...] = ("/usr", "/usr/local")
"""Where flux-sched installs itself (distribution packages; cmake's default prefix);
searched, in this order, when ``FLUENCE_FLUXION_LIB`` is unset."""


def installed_library() -> Path | None:
    """The first ``libreapi_cli.so`` under one of :data:`PREFIXES`, if any."""
    for prefix in PREFIXES:
        for candidate in _CANDIDATES:
            path = Path(prefix) / candidate
            if path.is_file():
                return path
    return None


def library_path(setting: str | os.PathLike[str]) -> Path:
    """The shared library named by the setting: the file itself or one under a prefix."""
    path = Path(setting)
    if path.is_dir():
        for candidate in _CANDIDATES:
            if (path / candidate).is_file():
                return path / candidate
        raise OSError(f"no libreapi_cli.so under {path} (looked in {', '.join(_CANDIDATES)})")
    if not path.exists():
        raise OSError(f"{path} does not exist")
    return path


class Library:
    """The loaded ``reapi_cli`` library plus libc's ``free`` for the strings it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.api: Any = ffi.dlopen(str(path))
        self.libc: Any = ffi.dlopen(None)

    def take_string(self, pointer: Any) -> str:
        """Copy a library-allocated C string into Python and free it."""
        if pointer == ffi.NULL:
            return ""
        try:
            return str(ffi.string(pointer).decode())
        finally:
            self.libc.free(pointer)
