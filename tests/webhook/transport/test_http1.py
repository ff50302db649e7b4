"""The webhook's HTTP/1.1: a strict request-head parser, and whole responses."""

from __future__ import annotations

import pytest

from fluence_core.webhook.transport import http1


def test_a_post_head_is_parsed_with_lower_case_header_names():
    head = http1.parse_head(b"POST /mutate?timeout=10s HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Type: application/json\r\nContent-Length: 12")
    assert (head.method, head.target, head.path, head.version) == (
        "POST", "/mutate?timeout=10s", "/mutate", (1, 1))
    assert head.headers == {"host": "x", "content-type": "application/json",
                            "content-length": "12"}
    assert head.content_length() == 12 and head.keep_alive


@pytest.mark.parametrize("raw, status, words", [
    (b"POST /mutate", 400, "request line"),
    (b"POST  /mutate HTTP/1.1", 400, "request line"),
    (b"POST /mutate HTTP/2.0", 505, "HTTP version"),
    (b"POST /mutate FTP/1.1", 400, "HTTP version"),
    (b"P(ST /mutate HTTP/1.1", 400, "method"),
    (b"POST /mutate HTTP/1.1\r\nno colon here", 400, "header line"),
    (b"POST /mutate HTTP/1.1\r\n folded: value", 400, "header line"),
    (b"POST /mutate HTTP/1.1\r\nX: a\nInjected: b", 400, "header line"),
    (b"POST /mutate HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 400, "twice"),
    (b"POST /mutate HTTP/1.1\r\n" + b"X: y\r\n" * 100 + b"X: y", 431, "header fields"),
])
def test_a_bad_head_is_refused_with_a_status_naming_what_is_wrong(raw, status, words):
    with pytest.raises(http1.BadRequest) as refused:
        http1.parse_head(raw)
    assert refused.value.status == status and words in refused.value.message


@pytest.mark.parametrize("headers, status, words", [
    (b"Transfer-Encoding: chunked", 411, "chunked"),
    (b"Content-Length: -1", 400, "Content-Length"),
    (b"Content-Length: 1e3", 400, "Content-Length"),
    (b"Content-Length: \xb2", 400, "Content-Length"),  # superscript 2: str.isdigit() says yes
])
def test_a_body_length_must_be_plain_digits_and_not_chunked(headers, status, words):
    head = http1.parse_head(b"POST /mutate HTTP/1.1\r\n" + headers)
    with pytest.raises(http1.BadRequest) as refused:
        head.content_length()
    assert refused.value.status == status and words in refused.value.message


def test_the_same_length_given_twice_is_one_length():
    head = http1.parse_head(b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3")
    assert head.content_length() == 3


def test_keep_alive_follows_the_version_and_the_connection_header():
    def alive(raw: bytes) -> bool:
        return http1.parse_head(raw).keep_alive

    assert alive(b"GET / HTTP/1.1") and not alive(b"GET / HTTP/1.1\r\nConnection: close")
    assert not alive(b"GET / HTTP/1.0") and alive(b"GET / HTTP/1.0\r\nConnection: keep-alive")


def test_a_response_is_one_buffer_with_its_length_and_date():
    data = http1.response(200, b'{"a":1}', http1.JSON)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 200 OK" and body == b'{"a":1}'
    fields = dict(line.split(b": ", 1) for line in lines[1:])
    assert fields[b"Content-Length"] == b"7" and fields[b"Content-Type"] == b"application/json"
    assert fields[b"Date"].endswith(b" GMT") and b"Connection" not in fields
    closing = http1.response(413, b"", http1.TEXT, close=True)
    assert closing.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
    assert b"\r\nConnection: close\r\n\r\n" in closing
