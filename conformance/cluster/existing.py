"""The ``existing`` provider: any cluster reachable through a kubeconfig and context.

It never creates or deletes a cluster: ``up`` checks the API answers and reports its version,
``down`` does nothing. What the cluster simulates is unknown to the harness, and reports say so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from .errors import HarnessError
from .provider import ClusterInfo, Progress, Provider, quiet
from .spec import ClusterSpec


def default_kubeconfig() -> Path:
    """``$KUBECONFIG`` (its first entry) or ``~/.kube/config``, as kubectl resolves it."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    return Path.home() / ".kube" / "config"


class ExistingProvider(Provider):
    name: ClassVar[str] = "existing"
    simulates: ClassVar[tuple[str, ...]] = ("unknown: an existing cluster, provisioned outside the harness",)

    def __init__(self, kubeconfig: str | Path | None = None, context: str | None = None) -> None:
        self.kubeconfig_path = Path(kubeconfig).expanduser() if kubeconfig else default_kubeconfig()
        self.context = context

    def _check_kubeconfig(self) -> None:
        if not self.kubeconfig_path.is_file():
            raise HarnessError(
                f"kubeconfig {self.kubeconfig_path} does not exist",
                "pass --kubeconfig PATH (and --context NAME) for the cluster to test",
            )

    def _version(self) -> str:
        from kubernetes import client
        from kubernetes.config.config_exception import ConfigException

        from .kube import api_client as make_client

        self._check_kubeconfig()
        try:
            api_client = make_client(self.kubeconfig_path, self.context)
        except ConfigException as exc:
            raise HarnessError(
                f"kubeconfig {self.kubeconfig_path}: {exc}", "check the file and the --context name"
            ) from exc
        try:
            info = client.VersionApi(api_client).get_code(_request_timeout=10)
        except Exception as exc:
            raise HarnessError(
                f"the cluster in {self.kubeconfig_path} (context {self.context or 'current'}) did not answer: {exc}",
                "check the cluster is up and the kubeconfig's credentials are valid",
            ) from exc
        return str(info.git_version)

    def up(self, spec: ClusterSpec, *, progress: Progress = quiet, owner_pid: int | None = None) -> ClusterInfo:
        progress(f"using the existing cluster in {self.kubeconfig_path}")
        return self.info(spec.name)

    def down(self, name: str) -> bool:
        return False  # never delete a cluster the harness did not create

    def status(self, name: str) -> dict[str, Any] | None:
        try:
            return {"phase": "ready", "kubernetesVersion": self._version(), "kubeconfig": str(self.kubeconfig_path)}
        except HarnessError as exc:
            return {"phase": "unreachable", "message": exc.message}

    def context_name(self) -> str | None:
        """The context the harness uses: ``--context``, else the kubeconfig's current-context
        (None when the file names none or cannot be read: the caller's name is kept then)."""
        if self.context:
            return self.context
        import yaml
        from kubernetes.config import list_kube_config_contexts
        from kubernetes.config.config_exception import ConfigException

        try:
            _, active = list_kube_config_contexts(config_file=str(self.kubeconfig_path))  # type: ignore[no-untyped-call]
        except (ConfigException, OSError, ValueError, yaml.YAMLError):
            return None
        return str(active["name"]) if active and active.get("name") else None

    def info(self, name: str) -> ClusterInfo:
        """The cluster, named by its context (the harness did not name it)."""
        return ClusterInfo(
            provider=self.name,
            name=self.context_name() or name,
            kubeconfig=self.kubeconfig_path,
            context=self.context,
            kubernetes_version=self._version(),
            simulates=self.simulates,
        )
