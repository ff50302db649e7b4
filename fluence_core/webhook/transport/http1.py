"""The little HTTP/1.1 the webhook speaks: a strict request-head parser and whole responses.

Why not :mod:`http.server`: its handler parses headers with the ``email``
package, formats a date and logs on every request, and writes through buffered
file objects; for a webhook answering one small JSON request per pod create,
that machinery was most of the server's own time (docs/admission-cost.md). The API
server sends plain, well-formed requests, so the parser here takes exactly that
and refuses anything else with a status and a message naming what is wrong:

* a request line ``METHOD SP target SP HTTP/1.x`` (``HTTP/1.0`` or ``HTTP/1.1``);
* header fields ``name: value``, names made of token characters, no line folding,
  at most :data:`MAX_HEADERS` of them, the whole head at most :data:`MAX_HEAD` bytes;
* ``Content-Length`` once (or repeated with one value), digits only.

Responses are built whole (status line, headers, body) so that the server writes
each in one call, on a socket without Nagle (see :mod:`~fluence_core.webhook.transport.server`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus

MAX_HEAD = 64 * 1024
"""Bytes a request's line and headers may take together (http.server allowed 64 KiB a line)."""
MAX_HEADERS = 100
"""Header fields a request may carry (as http.server)."""
MAX_LENGTH_DIGITS = 18
"""Digits a Content-Length may have (any body limit here is far below 10**18 bytes)."""

_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789"
                   b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_VERSIONS = {b"HTTP/1.1": (1, 1), b"HTTP/1.0": (1, 0)}


class BadRequest(Exception):
    """A request the server refuses before reading a body: its status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Head:
    """A request's line and headers (names in lower case; a repeated header keeps its last
    value, but for ``Content-Length``, which must agree)."""

    method: str
    target: str
    version: tuple[int, int]
    headers: dict[str, str]

    @property
    def path(self) -> str:
        """The target without its query."""
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        """Whether the client lets the connection serve another request after this one."""
        connection = self.headers.get("connection", "").lower()
        if self.version >= (1, 1):
            return "close" not in connection
        return "keep-alive" in connection

    def content_length(self) -> int | None:
        """The declared body length, None if none is declared.

        Raises :class:`BadRequest` (411) for a chunked body, (400) for a bad length.
        """
        if "transfer-encoding" in self.headers:
            raise BadRequest(411, "send the body with a Content-Length, not chunked")
        raw = self.headers.get("content-length")
        if raw is None:
            return None
        if not raw.isdigit() or not raw.isascii():
            raise BadRequest(400, f"bad Content-Length {raw[:40]!r}")
        if len(raw) > MAX_LENGTH_DIGITS:  # int() refuses 4,300 digits (and would take time)
            raise BadRequest(413, f"Content-Length of {len(raw)} digits is too large")
        return int(raw)


def parse_head(head: bytes) -> Head:
    """The request line and header fields of ``head`` (without the blank line ending it).

    Raises :class:`BadRequest` naming what is wrong.
    """
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise BadRequest(400, f"bad request line {lines[0][:80]!r}")
    method, target, raw_version = parts
    version = _VERSIONS.get(raw_version)
    if version is None:
        raise BadRequest(505 if raw_version.startswith(b"HTTP/") else 400,
                         f"HTTP version {raw_version[:20]!r} is not 1.0 or 1.1")
    if not set(method) <= _TOKEN:
        raise BadRequest(400, f"bad method {method[:20]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise BadRequest(431, f"more than {MAX_HEADERS} header fields")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or not set(name) <= _TOKEN or b"\n" in value \
                or b"\r" in value or b"\0" in value:
            raise BadRequest(400, f"bad header line {line[:80]!r}")
        key = name.decode("ascii").lower()
        text = value.strip(b" \t").decode("latin-1")
        if key == "content-length" and headers.get(key, text) != text:
            raise BadRequest(400, "Content-Length given twice with different values")
        headers[key] = text
    return Head(method.decode("ascii"), target.decode("latin-1"), version, headers)


class _Clock:
    """The ``Date`` header's value, formatted once a second, not once a request."""

    def __init__(self) -> None:
        self.second = -1
        self.value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self.second:
            self.value = formatdate(second, usegmt=True).encode("ascii")
            self.second = second
        return self.value


_clock = _Clock()
_STATUS_LINES = {status.value: f"HTTP/1.1 {status.value} {status.phrase}\r\n".encode("ascii")
                 for status in HTTPStatus}
JSON = b"application/json"
TEXT = b"text/plain; charset=utf-8"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
"""The interim answer to ``Expect: 100-continue``."""


def response(status: int, body: bytes, content_type: bytes, *, close: bool = False) -> bytes:
    """A whole HTTP/1.1 response: status line, headers and ``body`` in one buffer."""
    line = _STATUS_LINES.get(status) or f"HTTP/1.1 {status} \r\n".encode("ascii")
    return b"".join((
        line, b"Server: fluence-webhook\r\nDate: ", _clock.now(),
        b"\r\nContent-Type: ", content_type,
        b"\r\nContent-Length: ", str(len(body)).encode("ascii"),
        b"\r\nConnection: close\r\n\r\n" if close else b"\r\n\r\n", body))
