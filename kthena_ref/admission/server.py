"""The validating admission webhook, served over TLS by the controller process (aiohttp).

``POST /validate-modelserving`` takes an ``admission.k8s.io/v1`` AdmissionReview and answers
allowed, or denied with every problem's field path and reason (see :mod:`.rules`). A request
that is not an AdmissionReview gets HTTP 400 with a message, never a stack trace. aiohttp is
already installed as kubernetes_asyncio's transport, so serving needs no new dependency.
"""

from __future__ import annotations

import json
import logging
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web

from .rules import message, validate

log = logging.getLogger(__name__)
PATH = "/validate-modelserving"


def review_response(review: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview answer for ``review`` (pure; raises ValueError on a malformed review)."""
    request = review.get("request")
    if not isinstance(request, dict) or "uid" not in request:
        raise ValueError("not an admission.k8s.io/v1 AdmissionReview: missing request.uid")
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    if request.get("operation") in ("CREATE", "UPDATE") and isinstance(request.get("object"), dict):
        old = request.get("oldObject") if isinstance(request.get("oldObject"), dict) else None
        errors = validate(request["object"], old)
        if errors:
            response["allowed"] = False
            response["status"] = {"code": 422, "reason": "Invalid", "message": message(errors)}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def _handle(request: web.Request) -> web.Response:
    try:
        review = json.loads(await request.read())
        if not isinstance(review, dict):
            raise ValueError("the body is not a JSON object")
        answer = review_response(review)
    except ValueError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    except Exception:  # never leave the API server without an answer
        log.exception("webhook: unexpected error")
        return web.json_response({"error": "internal error"}, status=500)
    return web.json_response(answer)


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def serve(port: int, cert: Path, key: Path, host: str = "0.0.0.0") -> web.AppRunner:
    """Start the webhook; the caller keeps the runner and calls ``cleanup()`` to stop it."""
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post(PATH, _handle)
    app.router.add_get("/healthz", _healthz)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=context).start()
    log.info("webhook serving https://%s:%d%s", host, port, PATH)
    return runner
