"""Typed API handles for one test, on the official client, with a per-test User-Agent.

The suite talks to the cluster only through these handles. The User-Agent carries the
behaviour id (``kthena-conformance/<version> (<id>)``), so an implementation's audit log or
request log can be matched to the test that caused each request.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__


def user_agent(behaviour_id: str | None = None) -> str:
    base = f"kthena-conformance/{__version__}"
    return f"{base} ({behaviour_id})" if behaviour_id else base


@dataclass
class Kube:
    """The clients a test uses (all share one ``ApiClient``)."""

    api: Any
    core: Any
    apps: Any
    custom: Any
    discovery: Any
    apiext: Any
    policy: Any

    @classmethod
    def connect(cls, kubeconfig: Path | str | None, context: str | None) -> Kube:
        from kubernetes import client, config

        api = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig else None, context=context
        )
        api.user_agent = user_agent()
        return cls(
            api=api,
            core=client.CoreV1Api(api),
            apps=client.AppsV1Api(api),
            custom=client.CustomObjectsApi(api),
            discovery=client.DiscoveryV1Api(api),
            apiext=client.ApiextensionsV1Api(api),
            policy=client.PolicyV1Api(api),
        )

    def for_behaviour(self, behaviour_id: str | None) -> Kube:
        self.api.user_agent = user_agent(behaviour_id)
        return self
