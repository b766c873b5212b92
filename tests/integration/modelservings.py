"""Handles on ModelServings and their Pods in one namespace, shared by the controller tests."""

from __future__ import annotations

from typing import Any

from kubernetes import client

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"
NAME_LABEL = "modelserving.volcano.sh/name"


class World:
    """The test's handles on its namespace."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.ns = namespace
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, body))

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name))

    def patch(self, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, body)

    def pods(self, name: str) -> dict[str, Any]:
        items = self.core.list_namespaced_pod(self.ns, label_selector=f"{NAME_LABEL}={name}").items
        return {p.metadata.name: p for p in items}

    def events(self, name: str) -> list[str]:
        items = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [e.reason for e in items]
