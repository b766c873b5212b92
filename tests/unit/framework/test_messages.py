"""Failure messages as sentences (conformance.framework.messages): no HTTP headers, no retry chains."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, NewConnectionError

from conformance.framework.messages import api_error, readable, sentence, short

HEADERS = "HTTP response headers: HTTPHeaderDict({'Audit-Id': '1f', 'Cache-Control': 'no-cache, private'})"
BODY = '{"kind":"Status","status":"Failure","message":"Internal error occurred: failed calling webhook","code":500}'
RETRY = (
    "HTTPSConnectionPool(host='127.0.0.1', port=41234): Max retries exceeded with url: /api/v1/namespaces/x/pods "
    "(Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a2b1c>: Failed to establish "
    "a new connection: [Errno 111] Connection refused'))"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(f"(500)\nReason: Internal Server Error\n{HEADERS}\nHTTP response body: {BODY}\n",
                     "HTTP 500 Internal Server Error: Internal error occurred: failed calling webhook", id="ApiException"),
        pytest.param(f"waited 15s for Pods; last seen: ApiException: (404)\nReason: Not Found\n{HEADERS}\n"
                     'HTTP response body: {"message":"pods \\"x\\" not found"}\n; teardown: ok',
                     'waited 15s for Pods; last seen: HTTP 404 Not Found: pods "x" not found; teardown: ok',
                     id="quoted inside a wait"),
        pytest.param("(403)\nReason: Forbidden\n", "HTTP 403 Forbidden", id="no body"),
        pytest.param(f"MaxRetryError: {RETRY}", "cannot reach the API server at 127.0.0.1:41234: connection refused",
                     id="refused connection"),
        pytest.param("owners ['0b4f4f4e-1111-2222-3333-444455556666', '0b4f4f4e-1111-2222-3333-444455556667']",
                     "owners [2 UIDs]", id="a UID list"),
        pytest.param("uid 0b4f4f4e-1111-2222-3333-444455556666 changed", "uid UID changed", id="one UID"),
        pytest.param("expected 3 Pods, saw 2", "expected 3 Pods, saw 2", id="plain text untouched"),
    ],
)  # fmt: skip
def test_sentence(text: str, expected: str) -> None:
    assert sentence(text) == expected


def test_readable_exceptions() -> None:
    api = ApiException(status=500, reason="Internal Server Error")
    api.body = BODY
    assert readable(api) == "HTTP 500 Internal Server Error: Internal error occurred: failed calling webhook"
    cause = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")  # type: ignore[arg-type]
    retry = MaxRetryError(None, "/api/v1/pods", cause)  # type: ignore[arg-type]
    assert "connection refused" in (readable(retry) or "").lower()
    assert readable(ValueError("x")) is None
    service = type("ServiceException", (ApiException,), {})(status=503, reason="Service Unavailable")
    assert readable(service) == "HTTP 503 Service Unavailable"


@pytest.mark.parametrize(
    ("status", "reason", "body", "expected"),
    [
        (
            500,
            "Internal Server Error",
            BODY,
            "HTTP 500 Internal Server Error: Internal error occurred: failed calling webhook",
        ),
        (409, "Conflict", "not json", "HTTP 409 Conflict: not json"),
        (404, "", "", "HTTP 404"),
        (422, "Unprocessable", "[1, 2]", "HTTP 422 Unprocessable"),
    ],
)
def test_api_error(status: int, reason: str, body: str, expected: str) -> None:
    assert api_error(status, reason, body) == expected


def test_short_is_one_line_and_bounded() -> None:
    assert short("a\n  b\tc") == "a b c"
    assert short("x" * 50, 10) == "x" * 10 + "..."
