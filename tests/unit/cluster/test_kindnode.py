"""The kind node image's recipe, as data: the Debian mirror read from apt's sources, mmdebstrap's
command, containerd's config, kubeadm's image list, and the layers and archive written from disk."""

from __future__ import annotations

import hashlib
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from conformance.cluster.errors import HarnessError
from conformance.cluster.kindnode import (
    DEFAULT_MIRROR,
    ENABLED_UNITS,
    NODE_IMAGE_REPO,
    RUNC_PATH,
    UNITS,
    Entry,
    FromPath,
    containerd_config,
    debian_mirror,
    image_tags,
    mmdebstrap_argv,
    node_image_tag,
    text_files,
    write_image_archive,
    write_layer,
)
from conformance.cluster.realnode import images
from conformance.cluster.versions import PINNED


@pytest.mark.parametrize(
    ("sources", "mirror"),
    [
        ({"a.sources": "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"}, "http://deb.debian.org/debian"),
        ({"sources.list": "deb [arch=amd64] http://mirror.example/debian/ bookworm main\n"}, "http://mirror.example/debian"),
        ({"x.list": "deb https://packages.cloud.google.com/apt cloud-sdk main\n",
          "y.sources": "URIs: http://deb.debian.org/debian-security\n"}, DEFAULT_MIRROR),
        ({}, DEFAULT_MIRROR),
    ],
)  # fmt: skip
def test_debian_mirror(sources: dict[str, str], mirror: str) -> None:
    assert debian_mirror(sources) == mirror


def test_mmdebstrap_argv() -> None:
    argv = mmdebstrap_argv("http://m/debian", Path("/out/rootfs.tar"))
    assert argv[0] == "mmdebstrap" and argv[-3:] == ["bookworm", "/out/rootfs.tar", "http://m/debian"]
    include = next(a for a in argv if a.startswith("--include="))
    for package in ("systemd", "runc", "containernetworking-plugins", "iptables", "conntrack"):
        assert package in include.split("=", 1)[1].split(",")
    assert any("systemd-sysctl.service" in a for a in argv if a.startswith("--customize-hook="))


def test_containerd_config() -> None:
    doc = tomllib.loads(containerd_config("registry.k8s.io/pause:3.10.1"))
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert doc["version"] == 2
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10.1"
    assert cri["restrict_oom_score_adj"] is True and cri["enable_cdi"] is True
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    for handler in ("runc", "test-handler"):
        options = cri["containerd"]["runtimes"][handler]["options"]
        assert options == {"SystemdCgroup": True, "BinaryName": RUNC_PATH}


KUBEADM_LIST = """registry.k8s.io/kube-apiserver:v1.36.3
registry.k8s.io/kube-controller-manager:v1.36.3
registry.k8s.io/kube-scheduler:v1.36.3
registry.k8s.io/kube-proxy:v1.36.3
registry.k8s.io/coredns/coredns:v1.13.1
registry.k8s.io/pause:3.10.1
registry.k8s.io/etcd:3.6.6-0
"""


def test_image_tags() -> None:
    tags = image_tags(KUBEADM_LIST)
    assert tags["etcd"] == "registry.k8s.io/etcd:3.6.6-0"
    assert tags["pause"] == "registry.k8s.io/pause:3.10.1"
    assert tags["coredns"] == "registry.k8s.io/coredns/coredns:v1.13.1"


def test_image_tags_refuses_a_short_list() -> None:
    with pytest.raises(HarnessError, match="did not name etcd"):
        image_tags(KUBEADM_LIST.replace("registry.k8s.io/etcd:3.6.6-0", ""))


def test_text_files() -> None:
    files = text_files("registry.k8s.io/pause:3.10.1", PINNED.kubernetes)
    assert files["/kind/version"] == (PINNED.kubernetes, 0o644)
    assert files["/usr/local/bin/entrypoint"][1] == 0o755
    assert set(UNITS) <= set(files)
    assert {f"/etc/systemd/system/{u}" for u in ENABLED_UNITS} <= set(files)
    assert 'sandbox_image = "registry.k8s.io/pause:3.10.1"' in files["/etc/containerd/config.toml"][0]


def test_node_image_tag() -> None:
    assert node_image_tag("ab" * 32, "v1.36.3") == f"{NODE_IMAGE_REPO}:v1.36.3-abababababab"


def test_write_layer_is_deterministic_and_adds_parents(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(b"binary")
    entries: dict[str, Entry] = {"/usr/bin/tool": FromPath(blob, 0o755), "/etc/a.conf": images.File(b"a\n"),
                                 "/etc/link": images.Symlink("a.conf")}  # fmt: skip
    first = write_layer(tmp_path / "1.tar", entries)
    second = write_layer(tmp_path / "2.tar", entries)
    assert first == second == hashlib.sha256((tmp_path / "1.tar").read_bytes()).hexdigest()
    with tarfile.open(tmp_path / "1.tar") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == ["etc", "etc/a.conf", "etc/link", "usr", "usr/bin", "usr/bin/tool"]
    assert members["usr/bin/tool"].mode == 0o755 and members["usr/bin/tool"].mtime == 0
    assert members["etc/link"].linkname == "a.conf"


def test_write_image_archive(tmp_path: Path) -> None:
    layer = tmp_path / "layer.tar"
    digest = write_layer(layer, {"/x": images.File(b"x")})
    archive = tmp_path / "image.tar"
    write_image_archive(archive, [(layer, digest)], images.ImageConfig(entrypoint=("/x",)), ["example.local/x:1"])
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        (entry,) = manifest
        config = json.loads(tar.extractfile(entry["Config"]).read())  # type: ignore[union-attr]
        assert tar.extractfile(entry["Layers"][0]).read() == layer.read_bytes()  # type: ignore[union-attr]
    assert entry["RepoTags"] == ["example.local/x:1"]
    assert config["rootfs"]["diff_ids"] == [f"sha256:{digest}"]
    assert config["config"]["Entrypoint"] == ["/x"]


def test_app_entries_put_the_install_tree_under_opt_and_add_launchers(tmp_path: Path) -> None:
    from conformance.cluster.kindnode import APP_DIR, PYTHON_LAUNCHERS, app_entries, launcher

    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("#!/elsewhere/python\n")
    entries = app_entries(tmp_path)
    assert f"{APP_DIR}/pkg/__init__.py" in entries
    assert not any("__pycache__" in p or p.startswith(f"{APP_DIR}/bin") for p in entries)
    for name, body in PYTHON_LAUNCHERS.items():
        entry = entries[f"/usr/local/bin/{name}"]
        assert isinstance(entry, images.File) and entry.mode == 0o755
        assert entry.content.decode() == launcher(body)
    assert launcher("main()\n").startswith("#!/usr/bin/python3\n") and repr(APP_DIR) in launcher("")


def test_suite_image_aliases() -> None:
    from conformance.cluster.kindnode import _suite_texts, suite_image_aliases

    texts = ['image: "registry.example/engine:v1"', "registry.example/engine:v2 registry.example/role-a:v1",
             "registry.example/engine:latest other.example/x:v1 registry.example/engine:v1"]  # fmt: skip
    assert suite_image_aliases(texts) == {
        "v1": ["registry.example/engine:v1", "registry.example/role-a:v1"],
        "v2": ["registry.example/engine:v2"],
    }
    found = suite_image_aliases(_suite_texts())  # the suite's own placeholders
    assert "registry.example/engine:v1" in found["v1"] and "registry.example/engine:v2" in found["v2"]
