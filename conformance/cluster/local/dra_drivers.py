"""Vendors' DRA drivers on the embedded cluster's real nodes: what each per-node command gets, what
is certified, and when the kubelet has it registered.

Why this module exists: a vendor certifies a real DRA driver on the embedded cluster by running its
kubelet plugin on the real nodes (cluster spec ``dra_drivers``, :class:`..spec.DraDriver`), as a
DaemonSet would run it on a node, without an image registry. The plugin needs what the DaemonSet's
chart gives it: the node's name, API credentials, the kubelet's plugin and registration
directories and the CDI directory its container runtime reads. A real node keeps those under its
own run directory, not at ``/var/lib/kubelet`` and ``/etc/cdi``, so they are handed over in the
environment variables the kubeletplugin helper library's drivers read
(kubernetes-sigs/dra-example-driver and the drivers built from it: ``NODE_NAME``, ``CDI_ROOT``,
``KUBELET_REGISTRAR_DIRECTORY_PATH``, ``KUBELET_PLUGINS_DIRECTORY_PATH``) plus ``KUBECONFIG``.

The driver counts as started once its node's kubelet has it registered: the kubelet's plugin
manager lists the plugin's registration socket in its ``actual_state_of_world``
(``plugin_manager_total_plugins`` in the kubelet's ``/metrics``, read through the API server's node
proxy). What is certified is recorded as the executable's path and SHA-256, so a report can say
which build it certified.

Pure: :func:`driver_environment`, :func:`driver_components`, :func:`registered_sockets`,
:func:`driver_registered`. The rest reads files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import HarnessError
from ..spec import ClusterSpec, DraDriver
from .components import Component

ENV_NODE_NAME = "NODE_NAME"
ENV_KUBECONFIG = "KUBECONFIG"
ENV_PLUGINS = "KUBELET_PLUGINS_DIRECTORY_PATH"
ENV_REGISTRAR = "KUBELET_REGISTRAR_DIRECTORY_PATH"
ENV_CDI = "CDI_ROOT"


@dataclass(frozen=True)
class NodePluginDirs:
    """Where a DRA kubelet plugin on one real node serves, registers and writes CDI specs."""

    node: str
    plugins: Path  # the kubelet's <root-dir>/plugins: <plugins>/<driver>/dra.sock
    registry: Path  # the kubelet's <root-dir>/plugins_registry: the plugin watcher scans it
    cdi: Path  # the node's containerd reads CDI specs here

    def as_dict(self) -> dict[str, str]:
        """The ``cluster status`` entry of the node."""
        return {"plugins": str(self.plugins), "registry": str(self.registry), "cdi": str(self.cdi)}


def driver_environment(driver: DraDriver, dirs: NodePluginDirs, kubeconfig: Path) -> dict[str, str]:
    """The variables one node's copy of ``driver`` gets (over the supervisor's own environment);
    the driver's ``env`` comes first, so the harness's values always win. Pure."""
    return {
        **driver.env,
        ENV_NODE_NAME: dirs.node,
        ENV_KUBECONFIG: str(kubeconfig),
        ENV_PLUGINS: str(dirs.plugins),
        ENV_REGISTRAR: str(dirs.registry),
        ENV_CDI: str(dirs.cdi),
    }


def component_name(driver: str, node: str) -> str:
    """``dra-driver-<driver>-<node>``: the process's name and its log file's stem."""
    return f"dra-driver-{driver}-{node}"


def driver_components(
    spec: ClusterSpec, dirs: Mapping[str, NodePluginDirs], kubeconfig: Path, programs: Mapping[str, str]
) -> list[Component]:
    """One component per driver per real node it runs on (``programs``: each driver's resolved
    executable, replacing the command's first word). Pure."""
    return [
        Component(
            component_name(driver.name, node),
            (programs[driver.name], *driver.command[1:]),
            after=("kube-apiserver",),
            env=tuple(sorted(driver_environment(driver, dirs[node], kubeconfig).items())),
        )
        for driver in spec.dra_drivers
        for node in spec.driver_nodes(driver)
    ]


_PLUGIN_METRIC = re.compile(r"^plugin_manager_total_plugins\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def registered_sockets(metrics: str) -> frozenset[str]:
    """The registration sockets the kubelet's plugin manager has registered (state
    ``actual_state_of_world``, count > 0) in its Prometheus text ``metrics``. Pure."""
    found = set()
    for match in _PLUGIN_METRIC.finditer(metrics):
        labels = dict(_LABEL.findall(match.group("labels")))
        try:
            count = float(match.group("value"))
        except ValueError:
            continue
        if labels.get("state") == "actual_state_of_world" and count > 0 and labels.get("socket_path"):
            found.add(labels["socket_path"])
    return frozenset(found)


def driver_registered(driver: str, registry: Path, sockets: frozenset[str]) -> bool:
    """Whether a registered socket in ``registry`` is ``driver``'s: named after it, as the
    kubeletplugin helper names it (``<driver>-reg.sock``) and the fake plugin too. Pure."""
    return any(Path(s).parent == registry and Path(s).name.startswith(f"{driver}-") for s in sockets)


def resolve_program(driver: DraDriver, path_env: str | None = None) -> Path:
    """The executable the driver's command starts (a path, or a name found on ``PATH``);
    a :class:`HarnessError` naming the field when there is none."""
    word = driver.command[0]
    if "/" in word:
        found = Path(word).expanduser()
        if not (found.is_file() and os.access(found, os.X_OK)):
            raise HarnessError(
                f"dra_drivers ({driver.name}).command[0]: {word} is not an executable file",
                "build the driver's kubelet plugin first, and give its path",
            )
        return found.absolute()  # not resolved: a symlink may matter to the program (a virtualenv's python)
    which = shutil.which(word, path=path_env if path_env is not None else os.environ.get("PATH"))
    if which is None:
        raise HarnessError(
            f"dra_drivers ({driver.name}).command[0]: {word} is not on PATH", "give the plugin's path, or fix PATH"
        )
    return Path(which).absolute()


def executable_record(path: Path) -> dict[str, Any]:
    """What a report says about a certified executable: its path, size and SHA-256 (of the file a
    symlink points to)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return {"executable": str(path), "size": path.stat().st_size, "sha256": digest.hexdigest()}


def load_manifests(driver: DraDriver) -> list[tuple[str, dict[str, Any]]]:
    """Every object in the driver's manifest files, as ``("FILE document N", object)``; a file that
    cannot be read, is not YAML or holds something other than objects is a :class:`HarnessError`."""
    objects: list[tuple[str, dict[str, Any]]] = []
    for path in driver.manifests:
        try:
            docs = list(yaml.safe_load_all(Path(path).read_text()))
        except OSError as exc:
            raise HarnessError(
                f"dra_drivers ({driver.name}).manifests: cannot read {path}: {exc.strerror}", "check the path"
            ) from None
        except yaml.YAMLError as exc:
            raise HarnessError(
                f"dra_drivers ({driver.name}).manifests: {path} is not valid YAML: {exc}", "fix the file"
            ) from None
        for number, doc in enumerate(docs, 1):
            if doc is None:
                continue
            if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
                raise HarnessError(
                    f"dra_drivers ({driver.name}).manifests: {path} document {number} is not a Kubernetes object "
                    "(apiVersion and kind)",
                    "fix the file",
                )
            objects.append((f"{path} document {number}", doc))
    return objects


def check_drivers(spec: ClusterSpec) -> dict[str, Path]:
    """Before anything starts: every driver can run (real nodes, pools), its program exists, its
    manifests parse. Returns each driver's resolved executable."""
    problems = spec.driver_problems()
    if problems:
        raise HarnessError("; ".join(problems), "fix the cluster spec's dra_drivers")
    programs = {}
    for driver in spec.dra_drivers:
        programs[driver.name] = resolve_program(driver)
        load_manifests(driver)
    return programs


def records(spec: ClusterSpec, programs: Mapping[str, Path]) -> list[dict[str, Any]]:
    """What the cluster declares about its vendors' drivers: name, nodes, how it was installed and
    the executable's path, size and SHA-256."""
    return [
        {
            "name": driver.name,
            "installedBy": "cluster spec dra_drivers (a command per real node)",
            "command": [str(programs[driver.name]), *driver.command[1:]],
            "nodes": spec.driver_nodes(driver),
            **executable_record(programs[driver.name]),
        }
        for driver in spec.dra_drivers
    ]


def pending(drivers: Sequence[tuple[str, NodePluginDirs]], metrics: Mapping[str, str]) -> list[str]:
    """``driver on node`` for each driver whose node's kubelet (``metrics`` by node) has not
    registered it yet. Pure."""
    return [
        f"{driver} on {dirs.node}"
        for driver, dirs in drivers
        if not driver_registered(driver, dirs.registry, registered_sockets(metrics.get(dirs.node, "")))
    ]
