"""Failure messages people can read: an API error as a sentence, never an HTTP header dump.

Why this module exists: the Kubernetes client's exceptions print everything they hold. An
``ApiException`` is ``(500)`` then ``Reason:``, every HTTP response header and the raw JSON body;
a refused connection is a ``MaxRetryError`` naming a urllib3 connection object by its memory
address. A test's message, the run's causes and the HTML page quoted them as they were, so one
dead webhook read as 29 header dumps. :func:`readable` says what such an exception means in one
line (``HTTP 500 Internal Server Error: failed calling webhook ...``, ``cannot reach the API
server at 127.0.0.1:6443: connection refused``); :func:`sentence` cleans the same noise out of
text that already quotes one (a wait's "last seen"). Pure.
"""

from __future__ import annotations

import json
import re

WIDTH = 600
_HEADERS = re.compile(r"\s*HTTP response headers: HTTPHeaderDict\(\{.*?\}\)", re.S)
_API_EXCEPTION = re.compile(r"(?:\w+Exception: )?\((\d{3})\)\s*Reason: ([^\n]*)\n?(?:HTTP response body: ([^\n]*)\n?)?")
_MAX_RETRY = re.compile(
    r"(?:\w+: )?HTTPS?ConnectionPool\(host='([^']*)', port=(\d+)\): Max retries exceeded with url: (\S+)"
    r"(?: \(Caused by (\w+)\((.*)\)\))?",
    re.S,
)
_OBJECT = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>:?\s*")
_ERRNO = re.compile(r"\[Errno -?\d+\]\s*")
_UID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_UID_LIST = re.compile(r"\[(?:'?UID'?\s*,\s*)+'?UID'?\]")


def readable(exc: BaseException) -> str | None:
    """One line for an exception of the Kubernetes client or urllib3, or None for any other."""
    status = getattr(exc, "status", None)
    kinds = {k.__name__ for k in type(exc).__mro__}  # ServiceException, NotFoundException, ... are ApiExceptions
    if "ApiException" in kinds and isinstance(status, int):
        return api_error(status, str(getattr(exc, "reason", "") or ""), str(getattr(exc, "body", "") or ""))
    if type(exc).__name__ in ("MaxRetryError", "NewConnectionError", "ProtocolError", "ReadTimeoutError"):
        return sentence(f"{type(exc).__name__}: {exc}")
    return None


def api_error(status: int, reason: str, body: str) -> str:
    """``HTTP 500 Internal Server Error: <the body's message>``. Pure."""
    message = ""
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        message = " ".join(body.split())[:300]
    else:
        if isinstance(parsed, dict):
            message = str(parsed.get("message") or "")
    head = f"HTTP {status} {reason}".strip()
    return f"{head}: {message}" if message else head


def _retry(match: re.Match[str]) -> str:
    host, port, _url, cause, detail = match.groups()
    why = _OBJECT.sub("", _ERRNO.sub("", detail or "")).strip(" '\"")
    why = why.removeprefix("Failed to establish a new connection: ")
    words = why.lower() if why else (cause or "no answer")
    return f"cannot reach the API server at {host}:{port}: {words}"


def sentence(text: str) -> str:
    """``text`` without HTTP header dumps, raw API bodies, urllib3 retry chains, object addresses
    and UIDs (each UID becomes ``UID``, a list of them a count). Pure."""
    out = _HEADERS.sub("", text)
    out = _API_EXCEPTION.sub(_api_match, out)
    out = _MAX_RETRY.sub(_retry, out)
    out = _OBJECT.sub("", out)
    out = _UID.sub("UID", out)
    out = _UID_LIST.sub(lambda m: f"[{m.group(0).count('UID')} UIDs]", out)
    return out


def _api_match(match: re.Match[str]) -> str:
    status, reason, body = match.groups()
    return api_error(int(status), reason.strip(), body or "")


def short(text: str, width: int = WIDTH) -> str:
    """:func:`sentence`, on one line, at most ``width`` characters. Pure."""
    line = " ".join(sentence(text).split())
    return line if len(line) <= width else line[:width] + "..."
