"""The built-in plugins: demo-pod-tweaks and headless-service (pure), and the default registry.

demo-pod-tweaks sets ``runtimeClassName``, merges annotations (its keys win, spec reading 8) and
appends env to every container and init container.

headless-service gives each in-scope Role instance with a ``workerTemplate`` (even with
``workerReplicas: 0``) two headless Services that publish addresses before readiness:

- the Entry Service, named as upstream named its per-Role Service (the entry Pod's name),
  selecting only the entry Pod; ``ENTRY_ADDRESS=<entry-service>.<namespace>`` goes to every Pod
  of the instance (spec reading 7);
- the Discovery Service, ``<ms>-<ordinal>-<role>-<index>`` (the instance's name), selecting the
  entry and all workers; each new Pod gets ``hostname`` = its Pod name and ``subdomain`` = this
  Service, so a member's address is ``<pod>.<discovery-service>.<namespace>``.

A Role without ``workerTemplate`` gets neither. ``scope.target`` other than All is rejected.
"""

from __future__ import annotations

from typing import Any

from .. import faults
from ..api.types import PluginSpec, PluginTarget
from ..planner.names import LABEL_ENTRY, LABEL_GROUP, LABEL_NAME, LABEL_ROLE_ID, pod_name
from .base import HookRequest, NoOpHooks, PluginConfigError, Registry, decode

HEADLESS = "headless-service"
DEMO = "demo-pod-tweaks"
LABEL_SERVICE_KIND = "modelserving.volcano.sh/service-kind"


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod["spec"]
    return [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]


class DemoPodTweaks(NoOpHooks):
    supports_in_place = True  # its mutations are not images: an image patch keeps them

    def __init__(self, spec: PluginSpec, field: str) -> None:
        self.name = spec.name
        cfg = decode(spec.config, field, {"runtimeClassName": str, "annotations": dict, "env": list})
        for i, env in enumerate(cfg.get("env") or []):
            if not isinstance(env, dict) or not isinstance(env.get("name"), str) or not env["name"]:
                raise PluginConfigError(f"{field}.config.env[{i}]", "must be an EnvVar with a name")
        for key, value in (cfg.get("annotations") or {}).items():
            if not isinstance(value, str):
                raise PluginConfigError(f"{field}.config.annotations.{key}", "values must be strings")
        self.cfg = cfg

    def on_pod_create(self, req: HookRequest) -> None:
        assert req.pod is not None
        if self.cfg.get("runtimeClassName") and not faults.active("demo-runtime-class-ignored"):
            req.pod["spec"]["runtimeClassName"] = self.cfg["runtimeClassName"]
        if self.cfg.get("annotations"):
            meta = req.pod["metadata"]
            meta["annotations"] = {**(meta.get("annotations") or {}), **self.cfg["annotations"]}
            if faults.active("demo-annotations-replace"):  # the fault: the template's annotations are lost
                meta["annotations"] = dict(self.cfg["annotations"])
        for container in _containers(req.pod):
            container["env"] = [*(container.get("env") or []), *(dict(e) for e in self.cfg.get("env") or [])]
            if faults.active("demo-env-replaces") and self.cfg.get("env"):
                container["env"] = [dict(e) for e in self.cfg["env"]]


def entry_service_name(req: HookRequest) -> str:
    return pod_name(req.ms.metadata.name, req.ordinal, req.role.name, req.role_index, 0)


def discovery_service_name(req: HookRequest) -> str:
    return f"{req.ms.metadata.name}-{req.ordinal}-{req.role.name}-{req.role_index}"


class HeadlessService(NoOpHooks):
    supports_in_place = False  # ModelServings with it always take the recreate fallback

    def __init__(self, spec: PluginSpec, field: str) -> None:
        self.name = spec.name
        decode(spec.config, field, {})
        narrowed = spec.scope is not None and spec.scope.target is not PluginTarget.ALL
        if narrowed and not faults.active("headless-scope-target-accepted"):  # (the fault: Entry or Worker applied)
            raise PluginConfigError(f"{field}.scope.target", "must be omitted or All for headless-service")
        if faults.active("headless-scope-refused") and spec.scope is not None:
            raise PluginConfigError(f"{field}.scope", "must be omitted for headless-service")

    @staticmethod
    def applies(req: HookRequest) -> bool:
        return req.role.worker_template is not None or faults.active("headless-without-worker-template")

    @staticmethod
    def legacy_layout(req: HookRequest) -> bool:
        """Is the instance in the layout older controllers made: its Pods use the entry-named
        all-member Service as their subdomain, or (when its Pods are gone, e.g. rebuilt by the
        recovery policy) that Service still selects every member? Then the layout is preserved
        and MigrationRequired reported: the Pods' subdomain and env cannot change, and a rebuilt
        instance must not come back depending on the new layout (spec reading 10)."""
        entry = entry_service_name(req)
        if faults.active("migration-layout-changed"):
            return False
        if any((p.get("spec") or {}).get("subdomain") == entry for p in req.instance_pods):
            return True
        existing = req.services.get(entry)
        if existing is None or faults.active("entry-service-selects-all"):
            return False  # (under that fault our own Entry Service selects everyone: not a legacy one)
        selector = (existing.get("spec") or {}).get("selector") or {}
        return bool(selector) and LABEL_ENTRY not in selector

    def on_pod_create(self, req: HookRequest) -> None:
        if not self.applies(req):
            return
        assert req.pod is not None
        spec = req.pod["spec"]
        spec["hostname"] = req.pod["metadata"]["name"]
        if faults.active("hostname-as-fqdn"):  # the container's hostname becomes the FQDN, not the Pod name
            spec["setHostnameAsFQDN"] = True
        # A Pod recreated into a legacy instance keeps the old layout (spec reading 10).
        spec["subdomain"] = entry_service_name(req) if self.legacy_layout(req) else discovery_service_name(req)
        address = f"{entry_service_name(req)}.{req.ms.metadata.namespace}"
        if faults.active("wrong-entry-address"):
            address = f"{discovery_service_name(req)}.{req.ms.metadata.namespace}"
        if faults.active("entry-pod-own-address") and req.target is PluginTarget.ENTRY:  # its member address
            address = f"{spec['hostname']}.{discovery_service_name(req)}.{req.ms.metadata.namespace}"
        for container in _containers(req.pod):
            kept = [e for e in container.get("env") or [] if e.get("name") != "ENTRY_ADDRESS"]
            container["env"] = [*kept, {"name": "ENTRY_ADDRESS", "value": address}]

    def on_role_sync(self, req: HookRequest) -> list[dict[str, Any]]:
        if not self.applies(req):
            return []
        legacy = self.legacy_layout(req)
        if legacy:
            req.reports.append(
                (
                    "MigrationRequired",
                    f"role {req.role_id} of ServingGroup {req.group} uses the all-member Service "
                    f"{entry_service_name(req)} as its Pods' subdomain; the layout is preserved: create a new "
                    "ModelServing and migrate traffic to get the Entry and Discovery Services",
                )
            )
        from ..planner.pods import owner_reference

        ms = req.ms.metadata.name
        base = {LABEL_NAME: ms, LABEL_GROUP: req.group, LABEL_ROLE_ID: req.role_id}

        def service(name: str, kind: str, selector: dict[str, str]) -> dict[str, Any]:
            return {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": name,
                    "namespace": req.ms.metadata.namespace,
                    "labels": {**base, LABEL_SERVICE_KIND: kind},
                    "ownerReferences": [owner_reference(req.ms)],
                },
                "spec": {
                    "clusterIP": "None",
                    "publishNotReadyAddresses": not faults.active("services-not-published-before-ready"),
                    "selector": selector,
                },
            }

        entry = service(entry_service_name(req), "entry", {**base, LABEL_ENTRY: "true"})
        if faults.active("entry-service-selects-all"):
            entry["spec"]["selector"] = dict(base)
        if legacy:  # the existing all-member Service keeps its name, UID and selector
            return [entry]
        if faults.active("no-discovery-service"):
            return [entry]
        members = dict(base)
        if faults.active("discovery-selects-across-groups"):
            del members[LABEL_GROUP]  # the role id alone: the same instance of every ServingGroup matches
        third = faults.active("third-service-per-instance")  # an all-member Service kept alongside
        extra = [service(f"{discovery_service_name(req)}-all", "discovery", members)] if third else []
        return [entry, service(discovery_service_name(req), "discovery", members), *extra]


def default_registry() -> Registry:
    registry = Registry()
    registry.register(DEMO, DemoPodTweaks)
    registry.register(HEADLESS, HeadlessService)
    return registry


REGISTRY = default_registry()
