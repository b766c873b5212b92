"""The kind node image, built on this machine from Debian packages and the harness's own binaries.

No registry is reachable here, so ``kindest/node`` cannot be pulled, and ``kind build node-image``
pulls helper images. The harness writes the image itself, the way kind's base image is laid out
(read from kubernetes-sigs/kind ``images/base``; nothing copied):

- layer 1, the root file system: Debian bookworm from the configured mirror (``mmdebstrap``) with
  systemd, iptables/nftables, conntrack, iproute2, Debian's runc and CNI plugins; kind's base-image
  systemd tweaks (no units wanted by default, ``ReadKMsg=no``), ``systemd-sysctl`` masked (a
  privileged node would write the host's global sysctls). Cached by its package list and mirror;
- layer 2, what the harness adds: kubelet, kubeadm, kubectl (``/usr/bin``, where kind's units
  expect them), containerd 2 with its shim, ``ctr`` and crictl (``/usr/local/bin``), the systemd
  units kind's base image has (containerd, kubelet with the kubeadm drop-in, ``kubelet.slice``),
  ``/etc/containerd/config.toml`` (systemd cgroups, CDI on, ``restrict_oom_score_adj`` since
  ``CAP_SYS_RESOURCE`` may be missing), an entrypoint that prepares the container for systemd
  (shared mounts, the ``/kubelet`` cgroup roots on cgroup v1, a fresh machine-id, the iptables
  mode Docker used, Docker's DNS reachable from Pods), ``/kind/version``, and the images a
  cluster needs as docker-archives in ``/kind/images``, imported into containerd at boot by a
  unit ordered before the kubelet: the control plane, etcd and kube-proxy of the pinned version
  (kube-proxy's image is layer 1 plus the binary: it needs iptables), the pause image, CoreDNS
  and the workload images (:mod:`.realnode.images`).

The image is tagged ``kthena-conformance.local/kind-node:<kubernetes>-<recipe digest>``: the digest
covers every input (package list, mirror, the binaries' SHA-256s, every file written), so a changed
input builds a new image and an unchanged one is found in the engine's (persistent) data root.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import HarnessError
from .paths import cache_root
from .realnode import images
from .versions import COREDNS, PINNED

Progress = Callable[[str], None]

SUITE = "bookworm"
FORMAT = 1  # bump when the layout changes in a way the inputs below do not show
NODE_IMAGE_REPO = "kthena-conformance.local/kind-node"
COREDNS_IMAGE = f"kthena-conformance.local/coredns:{COREDNS}"
ROOTFS_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "iproute2",
    "iptables",
    "nftables",
    "conntrack",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "procps",
    "bash",
    "ca-certificates",
    "libseccomp2",
    "runc",
    "containernetworking-plugins",
    "socat",
    # the Python images (the reference controller, the fake DRA drivers) use this root file system too
    "python3",
)
CNI_BIN_DIR = "/usr/lib/cni"
RUNC_PATH = "/usr/sbin/runc"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Binaries from the harness's cache -> where they go in the node.
NODE_BINARIES = {
    "kubelet": "/usr/bin/kubelet",
    "kubeadm": "/usr/bin/kubeadm",
    "kubectl": "/usr/bin/kubectl",
    "containerd": "/usr/local/bin/containerd",
    "containerd-shim-runc-v2": "/usr/local/bin/containerd-shim-runc-v2",
    "ctr": "/usr/local/bin/ctr",
    "crictl": "/usr/local/bin/crictl",
}
# kubeadm's image name -> the harness binary its image runs (at /usr/local/bin/<name>).
CONTROL_PLANE_IMAGES = {
    "kube-apiserver": "kube-apiserver",
    "kube-controller-manager": "kube-controller-manager",
    "kube-scheduler": "kube-scheduler",
    "etcd": "etcd",
}
IMAGES_DIR = "/kind/images"

_ROOTFS_HOOKS = (
    'rm -f "$1"/lib/systemd/system/multi-user.target.wants/* "$1"/etc/systemd/system/*.wants/* '
    '"$1"/lib/systemd/system/local-fs.target.wants/* "$1"/lib/systemd/system/sockets.target.wants/*udev* '
    '"$1"/lib/systemd/system/sockets.target.wants/*initctl* "$1"/lib/systemd/system/basic.target.wants/*',
    'find "$1"/lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete',
    'echo ReadKMsg=no >> "$1"/etc/systemd/journald.conf',
    'chroot "$1" systemctl mask systemd-binfmt.service systemd-sysctl.service systemd-modules-load.service '
    "getty.target console-getty.service",
    'mkdir -p "$1"/etc/kubernetes/manifests "$1"/opt/cni/bin',
    'rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*',
)
_DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


def _quiet(_: str) -> None:
    pass


# --- pure parts -----------------------------------------------------------------------------------


def debian_mirror(sources: Mapping[str, str]) -> str:
    """The Debian mirror apt is configured with: the first ``.../debian`` URI (not the security
    archive) in ``sources`` (file name -> text: one-line ``deb`` lines or deb822 ``URIs:``)."""
    for _name, text in sorted(sources.items()):
        for line in text.splitlines():
            words = line.split()
            uris: list[str] = []
            if words[:1] == ["deb"]:
                uris = [w for w in words[1:] if "://" in w][:1]
            elif words[:1] == ["URIs:"]:
                uris = words[1:]
            for uri in uris:
                if uri.rstrip("/").endswith("/debian"):
                    return uri.rstrip("/")
    return DEFAULT_MIRROR


def mmdebstrap_argv(mirror: str, output: Path, packages: tuple[str, ...] = ROOTFS_PACKAGES) -> list[str]:
    """The mmdebstrap command that writes the node's root file system tar (pure)."""
    argv = ["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar", f"--include={','.join(packages)}"]
    argv += [f"--dpkgopt=path-exclude={p}" for p in _DPKG_EXCLUDES]
    argv += [f"--customize-hook={hook}" for hook in _ROOTFS_HOOKS]
    return [*argv, SUITE, str(output), mirror]


def containerd_config(sandbox_image: str) -> str:
    """The node's ``/etc/containerd/config.toml`` (config version 2, the paths kind's patches use)."""
    runtime = f"""  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{{name}}.options]
    SystemdCgroup = true
    BinaryName = "{RUNC_PATH}"
"""
    return (
        "# Written by kthena-conformance (conformance/cluster/kindnode.py).\n"
        "version = 2\n\n"
        '[plugins."io.containerd.grpc.v1.cri"]\n'
        f'  sandbox_image = "{sandbox_image}"\n'
        "  tolerate_missing_hugepages_controller = true\n"
        "  # CAP_SYS_RESOURCE may be missing (a sandboxed host): no negative oom_score_adj\n"
        "  restrict_oom_score_adj = true\n"
        "  enable_cdi = true\n"
        '  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n'
        '[plugins."io.containerd.grpc.v1.cri".cni]\n'
        f'  bin_dir = "{CNI_BIN_DIR}"\n'
        '  conf_dir = "/etc/cni/net.d"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n'
        '  snapshotter = "overlayfs"\n'
        '  default_runtime_name = "runc"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        + runtime.replace("{name}", "runc")
        + "# the runtime handler name Kubernetes' RuntimeClass tests use\n"
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler]\n'
        + runtime.replace("{name}", "test-handler")
    )


ENTRYPOINT = r"""#!/bin/sh
# Written by kthena-conformance (conformance/cluster/kindnode.py): prepares a kind node container
# for systemd, then runs it as PID 1. The same facts kind's base image entrypoint acts on.
set -eu
log() { echo "kthena-node-entrypoint: $*" >&2; }

# systemd wants a read-only /sys; --privileged made it writable. Mount propagation for the kubelet.
mount -o remount,ro /sys || log "could not remount /sys read-only"
mount --make-rshared /

# cgroup v1: the kubelet's cgroup root (/kubelet, /kubelet.slice under the systemd driver) in every
# hierarchy, bind-mounted onto itself so systemd does not remove it before the kubelet starts.
if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
  log "detected cgroup v1"  # kind waits for this line (or systemd's multi-user.target one)
  mount --make-rprivate /sys/fs/cgroup
  for hierarchy in $(grep ' - cgroup ' /proc/self/mountinfo | cut -d' ' -f5); do
    for root in kubelet kubelet.slice; do
      mkdir -p "$hierarchy/$root"
      case "$hierarchy" in
        */cpuset)
          cat "$hierarchy/cpuset.cpus" > "$hierarchy/$root/cpuset.cpus"
          cat "$hierarchy/cpuset.mems" > "$hierarchy/$root/cpuset.mems" ;;
      esac
      mount --bind "$hierarchy/$root" "$hierarchy/$root"
    done
  done
fi

# every node its own machine-id and product_uuid (the kubelet tells nodes apart by them)
rm -f /etc/machine-id
systemd-machine-id-setup >/dev/null
cat /proc/sys/kernel/random/uuid > /kind/product_uuid
for f in /sys/class/dmi/id/product_uuid /sys/devices/virtual/dmi/id/product_uuid; do
  if [ -f "$f" ]; then mount -o ro,bind /kind/product_uuid "$f"; fi
done

# the iptables mode of the rules Docker put in this network namespace
legacy=$( (iptables-legacy-save; ip6tables-legacy-save) 2>/dev/null | grep -c '^-' || true)
nft=$( (iptables-nft-save; ip6tables-nft-save) 2>/dev/null | grep -c '^-' || true)
mode=nft
if [ "${legacy:-0}" -gt "${nft:-0}" ]; then mode=legacy; fi
update-alternatives --set iptables "/usr/sbin/iptables-$mode" >/dev/null
update-alternatives --set ip6tables "/usr/sbin/ip6tables-$mode" >/dev/null

# Docker's embedded DNS (127.0.0.11) cannot be reached from Pods: answer on the gateway address
# instead (Pods get the node's resolv.conf), and let routed traffic reach loopback DNAT targets.
echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet
gateway=$(ip -4 route show default | cut -d' ' -f3)
if [ -n "$gateway" ] && grep -q '127.0.0.11' /etc/resolv.conf; then
  iptables-save \
    | sed -e "s/-d 127.0.0.11/-d $gateway/g" \
          -e 's/-A OUTPUT \(.*\) -j DOCKER_OUTPUT/\0\n-A PREROUTING \1 -j DOCKER_OUTPUT/' \
          -e "s/--to-source :53/--to-source $gateway:53/g" \
          -e "s/p -j DNAT --to-destination 127.0.0.11/p --dport 53 -j DNAT --to-destination 127.0.0.11/g" \
    | iptables-restore
  sed -e "s/127.0.0.11/$gateway/g" /etc/resolv.conf > /tmp/resolv.conf
  cat /tmp/resolv.conf > /etc/resolv.conf
  rm -f /tmp/resolv.conf
fi

log "starting $*"
exec "$@"
"""

PRELOAD = r"""#!/bin/sh
# Written by kthena-conformance (conformance/cluster/kindnode.py): imports the images this node
# image carries into containerd (no registry to pull them from), before the kubelet starts. kind
# restarts containerd once (to apply its config patches): an import it interrupts is tried again.
set -u
for archive in /kind/images/*.tar; do
  tries=0
  until ctr --namespace k8s.io images import "$archive" >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 120 ]; then echo "could not import $archive into containerd" >&2; exit 1; fi
    sleep 1
  done
done
touch /run/kthena-images-imported
"""

UNITS: Mapping[str, str] = {
    "/etc/systemd/system/containerd.service": """[Unit]
Description=containerd container runtime (kthena-conformance kind node)
After=network.target local-fs.target
StartLimitIntervalSec=0

[Service]
ExecStart=/usr/local/bin/containerd
Environment=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=1
LimitNPROC=infinity
LimitCORE=infinity
LimitNOFILE=1048576
TasksMax=infinity

[Install]
WantedBy=multi-user.target
""",
    "/etc/systemd/system/kthena-preload.service": """[Unit]
Description=Import the images this kind node image carries into containerd
After=containerd.service
Requires=containerd.service
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/kind/bin/preload-images

[Install]
WantedBy=multi-user.target
""",
    "/etc/systemd/system/kubelet.service": """[Unit]
Description=kubelet: The Kubernetes Node Agent (kthena-conformance kind node)
ConditionPathExists=/var/lib/kubelet/config.yaml
After=kthena-preload.service

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=1s
CPUAccounting=true
MemoryAccounting=true
Slice=kubelet.slice
KillMode=process

[Install]
WantedBy=multi-user.target
""",
    "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": """[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
""",
    "/etc/systemd/system/kubelet.service.d/11-kind.conf": """[Service]
ExecStartPre=/bin/sh -euc "if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then \\
mkdir -p /sys/fs/cgroup/systemd/kubelet; fi"
""",
    "/etc/systemd/system/kubelet.slice": """[Unit]
Description=slice used to run Kubernetes / Kubelet
Before=slices.target

[Slice]
MemoryAccounting=true
CPUAccounting=true
""",
}
ENABLED_UNITS = ("containerd.service", "kthena-preload.service", "kubelet.service")


def text_files(sandbox_image: str, kubernetes_version: str) -> dict[str, tuple[str, int]]:
    """Every text file of layer 2: path -> (content, mode) (pure)."""
    files: dict[str, tuple[str, int]] = {path: (text, 0o644) for path, text in UNITS.items()}
    files.update(
        {
            "/usr/local/bin/entrypoint": (ENTRYPOINT, 0o755),
            "/kind/bin/preload-images": (PRELOAD, 0o755),
            "/etc/containerd/config.toml": (containerd_config(sandbox_image), 0o644),
            "/etc/crictl.yaml": ("runtime-endpoint: unix:///run/containerd/containerd.sock\n", 0o644),
            "/etc/default/kubelet": ("KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service\n", 0o644),
            "/kind/version": (kubernetes_version, 0o644),
            "/kind/README.txt": (
                "A kind node image written by kthena-conformance (conformance/cluster/kindnode.py).\n",
                0o644,
            ),
        }
    )
    return files


def image_tags(kubeadm_list: str) -> dict[str, str]:
    """kubeadm's image name -> reference, from ``kubeadm config images list`` output (pure)."""
    tags: dict[str, str] = {}
    for line in kubeadm_list.split():
        name = line.rsplit("/", 1)[-1].split(":", 1)[0]
        tags[name] = line
    missing = {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "pause"} - set(tags)
    if missing:
        raise HarnessError(
            f"`kubeadm config images list` did not name {', '.join(sorted(missing))}: {kubeadm_list.strip()!r}",
            "rebuild kubeadm with `kthena-conformance binaries build --force`",
        )
    return tags


SUITE_IMAGE = re.compile(r"registry\.example/[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9][A-Za-z0-9._-]*")


def suite_image_aliases(texts: list[str]) -> dict[str, list[str]]:
    """Workload variant -> the placeholder images the suite's manifests name (``registry.example/*``)
    that a kind node carries as that variant (pure): ``:v2`` as ``v2``, every other tag as ``v1``;
    ``:latest`` never (its pull policy is Always: a real kubelet pulls it, on kind as anywhere).

    The suite's Pods need only a container that runs; on kwok any name runs, on a real kubelet only
    an image the node has. These names never resolve anywhere (``registry.example``), so carrying
    them as the harness's workload image changes nothing a registry could serve."""
    found = sorted({m for text in texts for m in SUITE_IMAGE.findall(text) if not m.endswith(":latest")})
    aliases: dict[str, list[str]] = {"v1": [], "v2": []}
    for ref in found:
        aliases["v2" if ref.endswith(":v2") else "v1"].append(ref)
    return aliases


def _suite_texts() -> list[str]:
    from .paths import go_modules_root

    suites = go_modules_root().parents[1] / "suites"
    return [p.read_text(errors="replace") for p in sorted(suites.rglob("*")) if p.suffix in (".py", ".yaml")]


def node_image_tag(digest: str, kubernetes_version: str = PINNED.kubernetes) -> str:
    return f"{NODE_IMAGE_REPO}:{kubernetes_version}-{digest[:12]}"


# --- writing layers and archives from files on disk ---------------------------------------------


@dataclass(frozen=True)
class FromPath:
    """A regular file in a layer whose content is a file on disk."""

    path: Path
    mode: int = 0o755


Entry = images.File | images.Directory | images.Symlink | FromPath


def _tarinfo(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def write_layer(out: Path, entries: Mapping[str, Entry]) -> str:
    """Write a layer tar of ``entries`` (path -> entry) to ``out``; return its sha256 (hex).

    Deterministic like :func:`.realnode.images.layer_tar`: sorted, parents added, root-owned, mtime 0.
    """
    names: dict[str, Entry] = {}
    for path, entry in entries.items():
        name = path.lstrip("/")
        names[name] = entry
        parent = os.path.dirname(name)
        while parent and parent not in names:
            names[parent] = images.Directory()
            parent = os.path.dirname(parent)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for name in sorted(names):
            entry = names[name]
            info = _tarinfo(name)
            if isinstance(entry, images.Directory):
                info.type, info.mode = tarfile.DIRTYPE, entry.mode
                tar.addfile(info)
            elif isinstance(entry, images.Symlink):
                info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, entry.target
                tar.addfile(info)
            elif isinstance(entry, images.File):
                info.mode, info.size = entry.mode, len(entry.content)
                tar.addfile(info, io.BytesIO(entry.content))
            else:
                info.mode, info.size = entry.mode, entry.path.stat().st_size
                with entry.path.open("rb") as f:
                    tar.addfile(info, f)
    return _file_sha256(out)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_image_archive(out: Path, layers: list[tuple[Path, str]], config: images.ImageConfig, tags: list[str]) -> None:
    """A docker-archive of one image whose layers are tar files on disk (``(path, sha256)``, bottom first)."""
    container: dict[str, object] = {"Env": list(config.env), "WorkingDir": config.working_dir}
    if config.entrypoint:
        container["Entrypoint"] = list(config.entrypoint)
    if config.cmd:
        container["Cmd"] = list(config.cmd)
    config_doc = {
        "architecture": config.architecture,
        "os": config.os,
        "created": "1970-01-01T00:00:00Z",
        "config": container,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest}" for _, digest in layers]},
    }
    config_bytes = json.dumps(config_doc, sort_keys=True, separators=(",", ":")).encode()
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    layer_names = [f"{digest}/layer.tar" for _, digest in layers]
    manifest = json.dumps([{"Config": config_name, "RepoTags": tags, "Layers": layer_names}]).encode()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("manifest.json", manifest), (config_name, config_bytes)):
            info = _tarinfo(name)
            info.mode, info.size = 0o644, len(data)
            tar.addfile(info, io.BytesIO(data))
        for (path, _), name in zip(layers, layer_names, strict=True):
            dir_info = _tarinfo(name.split("/")[0])
            dir_info.type, dir_info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(dir_info)
            info = _tarinfo(name)
            info.mode, info.size = 0o644, path.stat().st_size
            with path.open("rb") as f:
                tar.addfile(info, f)


# --- the builder (imperative shell) -------------------------------------------------------------


@dataclass(frozen=True)
class NodeImage:
    """A node image in the engine: its tag, image ID, and how long building it took (None: cached)."""

    tag: str
    image_id: str
    build_seconds: float | None
    images: tuple[str, ...]


def _read_sources() -> dict[str, str]:
    files: dict[str, str] = {}
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            files[str(path)] = path.read_text()
        except OSError:
            continue
    return files


class NodeImageBuilder:
    """Finds the node image for the current inputs in the Docker engine, or builds it."""

    def __init__(
        self,
        binaries: Mapping[str, Path],
        binary_digests: Mapping[str, str],
        docker_env: Mapping[str, str],
        root: Path | None = None,
    ) -> None:
        self.binaries = dict(binaries)
        self.digests = dict(binary_digests)
        self.env = dict(docker_env)
        self.root = root or cache_root() / "kind-node"

    def _docker(self, *args: str, timeout: float = 600, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
        if stdin is not None:
            with stdin.open("rb") as f:
                out = subprocess.run(
                    ["docker", *args], env=self.env, stdin=f, capture_output=True, timeout=timeout, check=False
                )
            return subprocess.CompletedProcess(
                out.args, out.returncode, out.stdout.decode(errors="replace"), out.stderr.decode(errors="replace")
            )
        return subprocess.run(
            ["docker", *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def kubeadm_images(self) -> dict[str, str]:
        out = subprocess.run(
            [str(self.binaries["kubeadm"]), "config", "images", "list", "--kubernetes-version", PINNED.kubernetes],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if out.returncode != 0:
            raise HarnessError(
                f"`kubeadm config images list` failed: {out.stderr.strip()[-300:]}",
                "rebuild kubeadm with `kthena-conformance binaries build --force`",
            )
        return image_tags(out.stdout)

    def recipe(self, mirror: str, tags: Mapping[str, str], busybox_digest: str) -> tuple[str, str]:
        """(root file system digest, node image digest) of the current inputs."""
        rootfs = hashlib.sha256(json.dumps([FORMAT, mmdebstrap_argv(mirror, Path("/out"))]).encode()).hexdigest()
        h = hashlib.sha256(rootfs.encode())
        for path, (text, mode) in sorted(text_files(tags["pause"], PINNED.kubernetes).items()):
            h.update(f"{path}:{mode:o}:".encode() + text.encode())
        h.update(
            json.dumps(
                [
                    sorted(tags.items()),
                    sorted(self.digests.items()),
                    busybox_digest,
                    COREDNS_IMAGE,
                    sorted(images.WORKLOAD_IMAGES.items()),
                    suite_image_aliases(_suite_texts()),
                ]
            ).encode()
        )
        return rootfs, h.hexdigest()

    def ensure(self, *, progress: Progress = _quiet) -> NodeImage:
        tags = self.kubeadm_images()
        busybox = images.read_busybox()
        mirror = debian_mirror(_read_sources())
        rootfs_digest, digest = self.recipe(mirror, tags, hashlib.sha256(busybox).hexdigest())
        tag = node_image_tag(digest)
        # kubeadm's CoreDNS image is not carried: its add-on is skipped (kindnet.py installs the harness's)
        carried = sorted(ref for name, ref in tags.items() if name != "coredns")
        preloaded = (*carried, COREDNS_IMAGE, *sorted(images.WORKLOAD_IMAGES.values()))
        found = self._docker("image", "inspect", "--format", "{{.Id}}", tag, timeout=60)
        if found.returncode == 0:
            return NodeImage(tag, found.stdout.strip(), None, preloaded)
        started = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        rootfs = self._rootfs(mirror, rootfs_digest, progress)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=self.root))
        try:
            progress("writing the node image's images (control plane, etcd, kube-proxy, pause, CoreDNS, workloads)")
            archives = self._archives(work, rootfs, tags, busybox)
            entries: dict[str, Entry] = {}
            for name, target in NODE_BINARIES.items():
                entries[target] = FromPath(self.binaries[name], 0o755)
            for path, (text, mode) in text_files(tags["pause"], PINNED.kubernetes).items():
                entries[path] = images.File(text.encode(), mode)
            for unit in ENABLED_UNITS:
                entries[f"/etc/systemd/system/multi-user.target.wants/{unit}"] = images.Symlink(f"../{unit}")
            for archive in archives:
                entries[f"{IMAGES_DIR}/{archive.name}"] = FromPath(archive, 0o644)
            layer = work / "layer.tar"
            progress("writing the node image's second layer")
            layer_digest = write_layer(layer, entries)
            config = images.ImageConfig(
                entrypoint=("/usr/local/bin/entrypoint", "/sbin/init"),
                env=(images.DEFAULT_PATH, "container=docker"),
            )
            archive_path = work / "node.tar"
            write_image_archive(
                archive_path, [(rootfs, self._rootfs_sha(rootfs)), (layer, layer_digest)], config, [tag]
            )
            progress(f"loading the node image {tag} into Docker")
            loaded = self._docker("load", "--input", str(archive_path), timeout=1200)
            if loaded.returncode != 0:
                raise HarnessError(
                    f"`docker load` of the node image failed: {loaded.stderr.strip()[-300:]}",
                    f"see the Docker engine's log; the inputs are in {self.root}",
                )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        image_id = self._docker("image", "inspect", "--format", "{{.Id}}", tag, timeout=60).stdout.strip()
        self._remove_older(tag)
        elapsed = time.monotonic() - started
        progress(f"node image {tag} built in {elapsed:.0f}s")
        return NodeImage(tag, image_id, elapsed, preloaded)

    def _remove_older(self, keep: str) -> None:
        """Node images of other recipes (each some 700 MB in the engine's data root) are removed; one
        a container still uses stays (``docker rmi`` refuses it)."""
        listed = self._docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", NODE_IMAGE_REPO, timeout=60)
        for reference in listed.stdout.split():
            if reference != keep:
                self._docker("rmi", reference, timeout=120)

    def rootfs(self, *, progress: Progress = _quiet) -> tuple[Path, str]:
        """The node's root file system tar (built once) and its sha256: other images' base layer."""
        mirror = debian_mirror(_read_sources())
        digest, _ = self.recipe(mirror, {"pause": ""}, "")
        path = self._rootfs(mirror, digest, progress)
        return path, self._rootfs_sha(path)

    def _rootfs_sha(self, rootfs: Path) -> str:
        sha = rootfs.with_suffix(".sha256")
        if sha.exists():
            return sha.read_text().strip()
        digest = _file_sha256(rootfs)
        sha.write_text(digest + "\n")
        return digest

    def _rootfs(self, mirror: str, digest: str, progress: Progress) -> Path:
        out = self.root / f"rootfs-{SUITE}-{digest[:16]}.tar"
        if out.exists():
            return out
        from .docker_engine import ensure_packages

        ensure_packages({"mmdebstrap": "mmdebstrap"}, progress=progress, what="building the kind node image")
        self.root.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial.tar")
        log = self.root / "mmdebstrap.log"
        progress(f"building the node's Debian {SUITE} root file system with mmdebstrap from {mirror} (once)")
        started = time.monotonic()
        with log.open("w") as f:
            proc = subprocess.run(
                mmdebstrap_argv(mirror, partial), stdout=f, stderr=subprocess.STDOUT, check=False, timeout=1800
            )
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise HarnessError(
                f"mmdebstrap failed (exit {proc.returncode}): {tail[0]}",
                f"see {log}; check the Debian mirror {mirror} is reachable",
            )
        partial.rename(out)
        progress(f"  root file system written in {time.monotonic() - started:.0f}s ({out.stat().st_size >> 20} MiB)")
        return out

    def _archives(self, work: Path, rootfs: Path, tags: Mapping[str, str], busybox: bytes) -> list[Path]:
        out: list[Path] = []
        path_env = (images.DEFAULT_PATH,)
        for image, binary in CONTROL_PLANE_IMAGES.items():
            layer = work / f"{image}.layer.tar"
            digest = write_layer(
                layer,
                {f"/usr/local/bin/{binary}": FromPath(self.binaries[binary], 0o755), "/tmp": images.Directory(0o1777)},
            )
            archive = work / f"{image}.tar"
            write_image_archive(archive, [(layer, digest)], images.ImageConfig(env=path_env), [tags[image]])
            layer.unlink()
            out.append(archive)
        proxy_layer = work / "kube-proxy.layer.tar"
        digest = write_layer(proxy_layer, {"/usr/local/bin/kube-proxy": FromPath(self.binaries["kube-proxy"], 0o755)})
        archive = work / "kube-proxy.tar"
        write_image_archive(
            archive,
            [(rootfs, self._rootfs_sha(rootfs)), (proxy_layer, digest)],
            images.ImageConfig(env=path_env),
            [tags["kube-proxy"]],
        )
        proxy_layer.unlink()
        out.append(archive)
        coredns = self.binaries.get("coredns")
        if coredns is None:
            raise HarnessError(
                "CoreDNS is not built (an optional binary whose build failed)",
                "run `kthena-conformance binaries build` and read why it failed",
            )
        layer = work / "coredns.layer.tar"
        digest = write_layer(layer, {"/coredns": FromPath(coredns, 0o755)})
        archive = work / "coredns.tar"
        write_image_archive(
            archive, [(layer, digest)], images.ImageConfig(entrypoint=("/coredns",), env=path_env), [COREDNS_IMAGE]
        )
        layer.unlink()
        out.append(archive)
        pause = work / "pause.tar"
        images.write_archive(pause, images.build_archive(images.sandbox_image(busybox), [tags["pause"]]))
        out.append(pause)
        aliases = suite_image_aliases(_suite_texts())
        for variant, reference in sorted(images.WORKLOAD_IMAGES.items()):
            path = work / f"workload-{variant}.tar"
            recipe = images.workload_image(busybox, variant)
            images.write_archive(path, images.build_archive(recipe, [reference, *aliases.get(variant, [])]))
            out.append(path)
        return out


# --- the project's own images (the reference controller, the fake DRA drivers) -------------------

APP_DIR = "/opt/kthena"
PYTHON_LAUNCHERS = {
    "kthena-ref": "from kthena_ref.cli import main\nmain()\n",
    "fake-devices": "import runpy\nrunpy.run_module('fake_devices', run_name='__main__')\n",
    "kthena-conformance": "from conformance.cli import run\nrun()\n",
}


def launcher(body: str) -> str:
    """A console script for the image's Python, with the project on its path (pure)."""
    return f"#!/usr/bin/python3\nimport sys\nsys.path.insert(0, {APP_DIR!r})\n{body}"


def app_entries(site: Path) -> dict[str, Entry]:
    """Layer entries for a ``pip install --target`` tree at ``site`` and the launchers."""
    entries: dict[str, Entry] = {}
    for path in sorted(site.rglob("*")):
        relative = path.relative_to(site)
        if relative.parts[0] == "bin" or "__pycache__" in relative.parts:
            continue
        target = f"{APP_DIR}/{relative.as_posix()}"
        if path.is_symlink():
            entries[target] = images.Symlink(os.readlink(path))
        elif path.is_dir():
            entries[target] = images.Directory()
        else:
            entries[target] = FromPath(path, 0o755 if os.access(path, os.X_OK) else 0o644)
    for name, body in PYTHON_LAUNCHERS.items():
        entries[f"/usr/local/bin/{name}"] = images.File(launcher(body).encode(), 0o755)
    return entries


def build_app_images(
    project: Path,
    rootfs: Path,
    rootfs_sha: str,
    tags: Mapping[str, tuple[str, ...]],
    docker_env: Mapping[str, str],
    work: Path,
    *,
    progress: Progress = _quiet,
) -> None:
    """The project installed (``pip install --target``, dependencies from PyPI) on the node's root
    file system, loaded into Docker once per entrypoint: ``tags`` maps a launcher name
    (:data:`PYTHON_LAUNCHERS`) to the tags of the image that runs it."""
    import sys

    site = work / "site"
    progress(f"installing this checkout ({project}) and its dependencies for the images (pip --target)")
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            str(site),
            str(project),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    if pip.returncode != 0:
        raise HarnessError(
            f"pip install of {project} failed: {pip.stderr.strip()[-400:]}",
            "check that PyPI is reachable (pip's configuration)",
        )
    layer = work / "app.layer.tar"
    digest = write_layer(layer, app_entries(site))
    for name, image_tags_ in tags.items():
        archive = work / f"{name}.tar"
        config = images.ImageConfig(
            entrypoint=(f"/usr/local/bin/{name}",), env=(images.DEFAULT_PATH, "PYTHONUNBUFFERED=1")
        )
        write_image_archive(archive, [(rootfs, rootfs_sha), (layer, digest)], config, list(image_tags_))
        loaded = subprocess.run(
            ["docker", "load", "--input", str(archive)],
            env=dict(docker_env),
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if loaded.returncode != 0:
            raise HarnessError(
                f"`docker load` of {', '.join(image_tags_)} failed: {loaded.stderr.strip()[-300:]}",
                "see the Docker engine's log",
            )
        archive.unlink()
        progress(f"image {', '.join(image_tags_)} loaded")


REFERENCE_IMAGE = "kthena-ref:ci"
FAKE_DEVICES_IMAGE = "kthena/fake-devices:dev"


def load_app_images(cluster: str, *, reference: str = REFERENCE_IMAGE, fake_devices: str = FAKE_DEVICES_IMAGE,
                    progress: Progress = _quiet) -> None:  # fmt: skip
    """Build the reference controller's and the fake DRA drivers' images from this checkout (no
    registry: the node's root file system plus the project installed with pip) and load them into
    the nodes of kind cluster ``cluster``."""
    from . import kind
    from .paths import repo_root

    env = kind._docker_env()
    kind.KindProvider()._find_kind()
    rootfs, sha = NodeImageBuilder({}, {}, env).rootfs(progress=progress)
    work = Path(tempfile.mkdtemp(prefix=".apps-", dir=cache_root()))
    try:
        build_app_images(repo_root(), rootfs, sha, {"kthena-ref": (reference,), "fake-devices": (fake_devices,)},
                         env, work, progress=progress)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for image in (reference, fake_devices):
        progress(f"loading {image} into the nodes of kind cluster '{cluster}'")
        kind._run(["kind", "load", "docker-image", image, "--name", cluster], timeout=900)
