"""A minimal HTTPS client for the few API calls the cluster supervisor makes while starting.

The supervisor polls health endpoints and creates Nodes within a 10-second start budget; the
official ``kubernetes`` client takes 1-2.5 s just to import here, so the supervisor speaks plain
JSON over ``http.client`` with the cluster's client certificate instead. Tests and the suite use
the official client; nothing else should grow on this module.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def json(self) -> object:
        return json.loads(self.body) if self.body else None


class RestClient:
    """JSON over HTTPS with a client certificate, verifying the server against a CA."""

    def __init__(self, server: str, *, ca: Path, cert: Path, key: Path, timeout: float = 5.0) -> None:
        parts = urlsplit(server)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 443
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=str(ca))
        self.context.load_cert_chain(str(cert), str(key))

    def request(self, method: str, path: str, body: object | None = None) -> Response:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=self.timeout)
        try:
            payload = json.dumps(body).encode() if body is not None and not isinstance(body, (bytes, str)) else body
            headers = {"Accept": "application/json"}
            if payload is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            return Response(resp.status, resp.read())
        finally:
            conn.close()

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def post(self, path: str, body: object) -> Response:
        return self.request("POST", path, body)


def probe(url: str, *, timeout: float = 1.0) -> bool:
    """True when ``url`` answers 200. Component health ports use self-signed certificates on
    loopback, so this probe does not verify them (it only asks "are you up?")."""
    parts = urlsplit(url)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(
            parts.hostname or "127.0.0.1", parts.port or 443, context=ctx, timeout=timeout
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        conn.request("GET", parts.path or "/")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
