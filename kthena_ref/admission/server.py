"""The validating admission webhook, served over TLS by the controller process (aiohttp).

``POST /validate-modelserving`` takes an ``admission.k8s.io/v1`` AdmissionReview and answers
allowed, or denied with every problem's field path and reason (see :mod:`.rules`).
``POST /validate-pod-eviction`` answers Evictions (``pods/eviction``) against the eviction budget
(:mod:`kthena_ref.eviction`): allowed, or denied with code 429. A request that is not an
AdmissionReview gets HTTP 400 with a message, never a stack trace. aiohttp is
already installed as kubernetes_asyncio's transport, so serving needs no new dependency.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .. import faults
from .rules import message, validate

if TYPE_CHECKING:
    from ..eviction import EvictionGuard

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
            if faults.active("admission-message-without-field"):
                response["status"]["message"] = "validation failed: " + "; ".join(e.reason for e in errors)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def eviction_response(review: dict[str, Any], guard: EvictionGuard) -> dict[str, Any]:
    """The AdmissionReview answer for an Eviction (raises ValueError on a malformed review)."""
    request = review.get("request")
    if not isinstance(request, dict) or "uid" not in request:
        raise ValueError("not an admission.k8s.io/v1 AdmissionReview: missing request.uid")
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    resource = request.get("resource") or {}
    if (
        request.get("operation") == "CREATE"
        and resource.get("resource") == "pods"
        and request.get("subResource") == "eviction"
    ):
        response.update(await guard.review(request))
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def _handle(request: web.Request) -> web.Response:
    return await _answer(request, lambda review: _sync(review_response(review)))


async def _sync(answer: dict[str, Any]) -> dict[str, Any]:
    return answer


async def _answer(request: web.Request, respond: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> web.Response:
    try:
        review = json.loads(await request.read())
        if not isinstance(review, dict):
            raise ValueError("the body is not a JSON object")
        answer = await respond(review)
    except ValueError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    except Exception:  # never leave the API server without an answer
        log.exception("webhook: unexpected error")
        return web.json_response({"error": "internal error"}, status=500)
    return web.json_response(answer)


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def serve(
    port: int, cert: Path, key: Path, host: str = "0.0.0.0", eviction: EvictionGuard | None = None
) -> web.AppRunner:
    """Start the webhook; the caller keeps the runner and calls ``cleanup()`` to stop it. With
    ``eviction``, Evictions are answered on ``/validate-pod-eviction`` too."""
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post(PATH, _handle)
    if eviction is not None:
        from ..eviction import PATH as EVICTION_PATH

        guard = eviction

        async def _evict(request: web.Request) -> web.Response:
            return await _answer(request, lambda review: eviction_response(review, guard))

        app.router.add_post(EVICTION_PATH, _evict)
    app.router.add_get("/healthz", _healthz)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=context).start()
    log.info("webhook serving https://%s:%d%s", host, port, PATH)
    return runner
