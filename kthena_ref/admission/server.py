"""The validating admission webhook, served over TLS by the controller process (aiohttp).

``POST /validate-modelserving`` takes an ``admission.k8s.io/v1`` AdmissionReview and answers
allowed, or denied with every problem's field path and reason (see :mod:`.rules`).
``POST /validate-autoscalingpolicy`` does the same for AutoscalingPolicies (see
:mod:`.autoscaling_rules`), on UPDATE as on CREATE; either path dispatches on the review's kind, so a
configuration that sends both kinds to one URL works too. ``POST /validate-modelbooster`` does the
same for ModelBoosters (:mod:`.modelbooster_rules`). For a disaggregated target the server
reads the target ModelServing's Roles (the eviction guard's API client, at most
:data:`LOOKUP_TIMEOUT_SECONDS`); a target not found, or a read that fails, skips that one rule and
never denies.
``POST /validate-pod-eviction`` answers Evictions (``pods/eviction``) against the eviction budget
(:mod:`kthena_ref.eviction`): allowed, or denied with code 429. A request that is not an
AdmissionReview gets HTTP 400 with a message, never a stack trace. aiohttp is
already installed as kubernetes_asyncio's transport, so serving needs no new dependency.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .. import faults
from ..api.autoscaling import KIND as POLICY_KIND
from ..api.autoscaling import PLURAL as POLICY_PLURAL
from ..runtime import scope
from .autoscaling_rules import lookup_target, validate_policy
from .rules import message, validate

if TYPE_CHECKING:
    from ..eviction import EvictionGuard

log = logging.getLogger(__name__)
PATH = "/validate-modelserving"
AUTOSCALING_PATH = "/validate-autoscalingpolicy"
MODELBOOSTER_PATH = "/validate-modelbooster"
BOOSTER_KIND, BOOSTER_PLURAL = "ModelBooster", "modelboosters"
LOOKUP_TIMEOUT_SECONDS = 2.0  # well inside the webhook's timeoutSeconds (10)

# The Role names of ModelServing (namespace, name), or None when it does not exist or cannot be read.
RoleLookup = Callable[[str, str], Awaitable[Collection[str] | None]]


def is_policy(request: dict[str, Any]) -> bool:
    """Whether an AdmissionRequest is about an AutoscalingPolicy (by its kind or resource)."""
    kind, resource = request.get("kind"), request.get("resource")
    return (isinstance(kind, dict) and kind.get("kind") == POLICY_KIND) or (
        isinstance(resource, dict) and resource.get("resource") == POLICY_PLURAL
    )


def is_booster(request: dict[str, Any]) -> bool:
    """Whether an AdmissionRequest is about a ModelBooster (by its kind or resource)."""
    kind, resource = request.get("kind"), request.get("resource")
    return (isinstance(kind, dict) and kind.get("kind") == BOOSTER_KIND) or (
        isinstance(resource, dict) and resource.get("resource") == BOOSTER_PLURAL
    )


def review_response(review: dict[str, Any], target_roles: Collection[str] | None = None) -> dict[str, Any]:
    """The AdmissionReview answer for ``review`` (pure; raises ValueError on a malformed review).
    ``target_roles``: for an AutoscalingPolicy, its target ModelServing's Role names when known."""
    request = review.get("request")
    if not isinstance(request, dict) or "uid" not in request:
        raise ValueError("not an admission.k8s.io/v1 AdmissionReview: missing request.uid")
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    if request.get("operation") in ("CREATE", "UPDATE") and isinstance(request.get("object"), dict):
        old = request.get("oldObject") if isinstance(request.get("oldObject"), dict) else None
        if is_policy(request):
            errors = validate_policy(request["object"], target_roles)
        elif is_booster(request):
            from .modelbooster_rules import field_errors

            errors = [] if faults.active("booster-crd-no-bounds") else field_errors(request["object"])
        else:
            errors = validate(request["object"], old)
        if errors:
            response["allowed"] = False
            response["status"] = {"code": 422, "reason": "Invalid", "message": message(errors)}
            if faults.active("admission-message-without-field") or (
                is_booster(request) and faults.active("booster-admission-message-without-field")
            ):
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


async def admission_response(review: dict[str, Any], lookup: RoleLookup | None = None) -> dict[str, Any]:
    """:func:`review_response`, after reading an AutoscalingPolicy's target Roles with ``lookup``
    (bounded by :data:`LOOKUP_TIMEOUT_SECONDS`; any failure reads as unknown, never a denial)."""
    request = review.get("request")
    roles: Collection[str] | None = None
    if (
        lookup is not None
        and isinstance(request, dict)
        and is_policy(request)
        and request.get("operation") in ("CREATE", "UPDATE")
        and isinstance(request.get("object"), dict)
    ):
        target = lookup_target(request["object"])
        namespace = request.get("namespace")
        # Only the policy's own namespace: a refusal must not list the Roles of another namespace's objects.
        if target is not None and isinstance(namespace, str) and target[0] in (None, namespace):
            try:
                roles = await asyncio.wait_for(lookup(namespace, target[1]), LOOKUP_TIMEOUT_SECONDS)
            except Exception as exc:  # a lookup is a courtesy: never deny because of it
                log.warning("webhook: cannot read ModelServing %s/%s: %s", namespace, target[1], exc)
    return review_response(review, roles)


class ModelServingRoles:
    """A :data:`RoleLookup` through the API server (GET, one short request; no cache, so a
    ModelServing created a moment ago is seen)."""

    def __init__(self, custom: Any, timeout: float = LOOKUP_TIMEOUT_SECONDS) -> None:
        self.custom = custom  # kubernetes_asyncio CustomObjectsApi
        self.timeout = timeout

    async def __call__(self, namespace: str, name: str) -> Collection[str] | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        from ..api.types import GROUP, PLURAL, VERSION

        try:
            raw = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self.timeout
            )
        except ApiException as exc:
            if exc.status != 404:  # 404: not created yet, accepted
                log.warning("webhook: cannot read ModelServing %s/%s: %s %s", namespace, name, exc.status, exc.reason)
            return None
        roles = ((raw.get("spec") or {}).get("template") or {}).get("roles") if isinstance(raw, dict) else None
        if not isinstance(roles, list):
            return None
        return [r["name"] for r in roles if isinstance(r, dict) and isinstance(r.get("name"), str)]


async def _answer(request: web.Request, respond: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> web.Response:
    try:
        review = json.loads(await request.read())
        if not isinstance(review, dict):
            raise ValueError("the body is not a JSON object")
        request_ns = review.get("request", {}).get("namespace") if isinstance(review.get("request"), dict) else None
        async with scope.namespace(request_ns if isinstance(request_ns, str) else None):  # scoped faults
            answer = await respond(review)
    except ValueError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    except Exception:  # never leave the API server without an answer
        log.exception("webhook: unexpected error")
        return web.json_response({"error": "internal error"}, status=500)
    return web.json_response(answer)


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


class WebhookListenError(Exception):
    """The webhook's address cannot be bound (in use, not this host's): a user's error, said as such."""


async def serve(
    port: int,
    cert: Path,
    key: Path,
    host: str = "0.0.0.0",
    eviction: EvictionGuard | None = None,
    lookup: RoleLookup | None = None,
) -> web.AppRunner:
    """Start the webhook; the caller keeps the runner and calls ``cleanup()`` to stop it. With
    ``eviction``, Evictions are answered on ``/validate-pod-eviction`` too, and (without
    ``lookup``) AutoscalingPolicy targets are read through the guard's API client."""
    if lookup is None and eviction is not None:
        lookup = ModelServingRoles(eviction.custom)
    roles = lookup

    async def _handle(request: web.Request) -> web.Response:
        return await _answer(request, lambda review: admission_response(review, roles))

    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post(PATH, _handle)
    app.router.add_post(AUTOSCALING_PATH, _handle)
    app.router.add_post(MODELBOOSTER_PATH, _handle)
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
    try:
        await web.TCPSite(runner, host, port, ssl_context=context).start()
    except OSError as exc:
        await runner.cleanup()
        raise WebhookListenError(f"the webhook cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    log.info("webhook serving https://%s:%d%s, %s and %s", host, port, PATH, AUTOSCALING_PATH, MODELBOOSTER_PATH)
    return runner
