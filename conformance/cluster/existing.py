"""The ``existing`` provider: any cluster reachable through a kubeconfig and context.

It never creates or deletes a cluster: ``up`` checks the API answers and reports its version,
``down`` does nothing. What the cluster simulates is unknown to the harness, and reports say so,
unless the cluster declares its capabilities (:mod:`.declared`: a cluster the local provider made
does): then its DNS server and the Pod faults it injects are used as the local provider uses them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from .declared import Declared
from .errors import BadInput, HarnessError
from .faults import FaultInjector
from .provider import ClusterInfo, NoFaults, Progress, Provider, kwok_fault_injector, quiet
from .spec import ClusterSpec


def default_kubeconfig() -> Path:
    """``$KUBECONFIG`` (its first entry) or ``~/.kube/config``, as kubectl resolves it."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    return Path.home() / ".kube" / "config"


def kubeconfig_problem(path: Path, context: str | None) -> str | None:
    """What makes ``path`` unusable as a kubeconfig with ``context`` (None: usable). Reads the file only."""
    import yaml

    from .. import yamlio

    if not path.is_file():
        return "does not exist" if not path.exists() else "is not a file"
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 text ({exc.reason})"
    except yaml.YAMLError as exc:
        return f"is not YAML: {yamlio.problem(exc)}"
    if not isinstance(data, dict):
        return f"is not a kubeconfig (a YAML mapping with clusters, users and contexts), but a {type(data).__name__}"
    contexts = data.get("contexts")
    names = [c.get("name") for c in contexts if isinstance(c, dict)] if isinstance(contexts, list) else []
    if not names:
        return "names no context (its contexts list is missing or empty)"
    wanted = context or data.get("current-context")
    if not wanted:
        return f"has no current-context: pass --context (one of: {', '.join(map(str, names))})"
    if wanted not in names:
        where = "--context" if context else "its current-context"
        return f"{where} {wanted!r} is not one of its contexts ({', '.join(map(str, names))})"
    return None


class ExistingProvider(Provider):
    name: ClassVar[str] = "existing"
    simulates: ClassVar[tuple[str, ...]] = ("unknown: an existing cluster, provisioned outside the harness",)

    def __init__(self, kubeconfig: str | Path | None = None, context: str | None = None) -> None:
        self.kubeconfig_path = Path(kubeconfig).expanduser() if kubeconfig else default_kubeconfig()
        self.context = context

    def _check_kubeconfig(self) -> None:
        self.check_inputs()

    def check_inputs(self) -> None:
        """The kubeconfig exists, is YAML, is a kubeconfig (a mapping with contexts) and has the
        context asked for (``--context``, else its current-context)."""
        problem = kubeconfig_problem(self.kubeconfig_path, self.context)
        if problem is not None:
            raise BadInput(
                f"--kubeconfig {self.kubeconfig_path}: {problem}",
                "pass --kubeconfig PATH (and --context NAME) of the cluster to test",
            )

    def _version(self) -> str:
        from kubernetes import client
        from kubernetes.config.config_exception import ConfigException

        from .kube import api_client as make_client

        self._check_kubeconfig()
        try:
            api_client = make_client(self.kubeconfig_path, self.context)
        except (ConfigException, ValueError, TypeError, KeyError, AttributeError) as exc:
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
        """The cluster, named by its context (the harness did not name it), with what it declares."""
        version = self._version()
        declared = self.declared()
        simulates = self.simulates
        details: dict[str, Any] = {}
        if declared is not None:
            faults = ", ".join(f.value for f in declared.faults) or "none"
            simulates = (
                *simulates,
                f"declared by {declared.made_by}: Pod faults {faults}; DNS {declared.dns or 'none'}; real nodes "
                + (_selector(declared.real_nodes.selector) if declared.real_nodes else "none"),
            )
            if declared.dns:
                details["dns"] = declared.dns
            if declared.real_nodes is not None:
                details["realNodes"] = declared.real_nodes.as_details()
            if declared.drivers:
                details["draDrivers"] = [dict(d) for d in declared.drivers]
        return ClusterInfo(
            provider=self.name,
            name=self.context_name() or name,
            kubeconfig=self.kubeconfig_path,
            context=self.context,
            kubernetes_version=version,
            simulates=simulates,
            details=details,
        )

    def declared(self) -> Declared | None:
        """What the cluster declares it can do (None when nothing, or it cannot be read)."""
        from kubernetes import client

        from .declared import read
        from .kube import api_client as make_client

        if not self.kubeconfig_path.is_file():
            return None
        try:
            return read(client.CoreV1Api(make_client(self.kubeconfig_path, self.context)))
        except Exception:  # a kubeconfig that cannot be used declares nothing; _version says why
            return None

    def fault_injector(self, info: ClusterInfo) -> FaultInjector:
        """The declared faults, injected as on the cluster that declared them (kwok stages keyed on
        annotations); none without a declaration."""
        declared = self.declared()
        if declared is None or not declared.faults:
            return NoFaults(self.name)
        return kwok_fault_injector(self.kubeconfig_path, self.context)

    def injects_now(self) -> frozenset[Any]:
        declared = self.declared()
        return declared.faults if declared is not None else frozenset()


def _selector(selector: dict[str, str] | Any) -> str:
    """How a real-node selector reads in the report: ``every node``, or ``k=v,...``."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "every node"
