"""The kind deployment (fake-devices/deploy, Dockerfile, requirements.txt), checked offline: kind
never runs here. tests/integration/test_fake_devices.py also server-side dry-runs the manifests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_devices.cli import parser
from fake_devices.drivers import DRIVERS

ROOT = Path(__file__).resolve().parents[3]
FAKE = ROOT / "fake-devices"
DEPLOY = FAKE / "deploy"


def manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in manifests() if d["kind"] == kind}


def test_every_object_is_well_formed_and_namespaced_in_fake_devices() -> None:
    docs = manifests()
    assert docs
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "DeviceClass"}
    for d in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(d), d
        if d["kind"] not in cluster_scoped:
            assert d["metadata"]["namespace"] == "fake-devices", d["metadata"]["name"]
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(names) == len(set(names))


def test_device_classes_match_the_drivers() -> None:
    assert by_kind("DeviceClass") == {s.device_class_name: s.device_class() for s in DRIVERS.values()}


def test_rbac_is_least_privilege() -> None:
    roles = by_kind("ClusterRole")
    assert roles["fake-devices-publisher"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceslices"],
            "verbs": ["get", "list", "watch", "create", "update", "delete"],
        },
    ]
    assert roles["fake-devices-kubelet-plugin"]["rules"] == [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}
    ]
    for binding in by_kind("ClusterRoleBinding").values():
        (subject,) = binding["subjects"]
        assert subject["kind"] == "ServiceAccount" and subject["name"] == binding["roleRef"]["name"]
        assert subject["name"] in by_kind("ServiceAccount")
    for role in roles.values():
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"]


def pod_specs() -> dict[str, dict[str, Any]]:
    return {
        name: d["spec"]["template"]["spec"] for kind in ("DaemonSet", "Deployment") for name, d in by_kind(kind).items()
    }


def test_containers_run_valid_cli_commands() -> None:
    seen = set()
    for spec in pod_specs().values():
        for ctr in spec["containers"]:
            args = parser().parse_args(ctr["args"])  # raises SystemExit for a bad command line
            seen.add((args.command, args.driver))
            assert spec["serviceAccountName"] in by_kind("ServiceAccount")
    assert seen == {(cmd, drv) for cmd in ("publish", "kubelet-plugin") for drv in DRIVERS}


@pytest.mark.parametrize("key", sorted(DRIVERS))
def test_kubelet_plugin_daemonset(key: str) -> None:
    shape = DRIVERS[key]
    spec = pod_specs()[f"fake-devices-kubelet-plugin-{key}"]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": shape.count_label, "operator": "Exists"}]
    (ctr,) = spec["containers"]
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in ctr["env"]} == {"NODE_NAME": "spec.nodeName"}
    mounts = {m["mountPath"] for m in ctr["volumeMounts"]}
    assert mounts == {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi"}
    host = {v["hostPath"]["path"] for v in spec["volumes"]}
    assert host == mounts
    assert ctr["securityContext"].get("privileged") is not True


def test_dockerfile_installs_the_requirements_and_runs_the_package() -> None:
    text = (FAKE / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim$", text, re.M)
    assert "pip install --no-cache-dir --disable-pip-version-check -r requirements.txt" in text
    assert "COPY fake_devices ./fake_devices" in text
    assert 'ENTRYPOINT ["python", "-m", "fake_devices"]' in text


def test_image_requirements_match_pyproject() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    reqs = [line for line in (FAKE / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    for req in reqs:
        assert req in deps, f"{req} differs from pyproject.toml"
