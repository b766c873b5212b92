"""What this host lacks for a real node, each missing piece with the command that fixes it.

A real node (a kubelet and containerd beside the kwok nodes) needs more of the host than the
control plane does: root, cgroups the kubelet can manage (v2, or the v1 cpu, memory, pids and
devices hierarchies), the bridge, br_netfilter and overlay kernel features, runc, iptables, the CNI
plugins in ``/usr/lib/cni`` and a *static* busybox (it goes into a workload image with no C
library beside it). On Debian all of it is ``apt-get install -y runc containernetworking-plugins
iptables busybox-static`` plus ``modprobe``. Rather than failing halfway through ``up`` with a
kubelet log to read, the harness checks first and says, one line per item, what is missing and
how to get it; a run without real nodes then skips or refuses the tests that need one.

:func:`gather_facts` only reads (``os.geteuid``, ``/proc``, ``/sys``, ``PATH``); :func:`evaluate`
decides from those facts alone, so every verdict and fix is tested on made-up hosts.
:func:`subnet_conflicts` reads ``ip -4 route`` output (the main table: what a new bridge's subnet
would collide with) and :func:`port_free` says whether a kubelet port can be bound.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import shutil
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

from conformance.cluster.errors import HarnessError

from . import host

APT_PACKAGES = ("runc", "containernetworking-plugins", "iptables", "busybox-static")
"""Every Debian package a real node needs (what the fixes below install, one at a time)."""

CGROUP_V1_CONTROLLERS = ("cpu", "memory", "pids", "devices")
"""The v1 hierarchies the kubelet's cgroupfs driver needs mounted."""

CGROUP_V2_CONTROLLERS = ("cpu", "memory", "pids")
"""The v2 controllers the kubelet needs (devices is an eBPF program in v2, not a controller)."""

CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
BUSYBOX = Path("/bin/busybox")

EXTRA_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""Searched after ``PATH`` (a non-login root shell may lack the sbin directories)."""

_ROUTE_TYPES = frozenset(
    {"unicast", "local", "broadcast", "multicast", "anycast", "blackhole", "unreachable", "prohibit", "throw", "nat"}
)


@dataclass(frozen=True)
class HostFacts:
    """What :func:`gather_facts` read about the host; :func:`evaluate` judges it.

    ``modules`` are the names in ``/proc/modules`` and ``/sys/module`` (a built-in feature with no
    parameters appears in neither: ``bridge_nf_sysctl`` is how a built-in br_netfilter shows).
    ``executables`` maps each found program (``runc``, ``iptables``, ``/usr/lib/cni/bridge``...) to
    its path. ``busybox_static`` is None when ``/bin/busybox`` is missing. ``cgroup_read_only`` are
    the cgroup hierarchies mounted read-only (a node's cgroup root cannot be made in them).
    Hierarchies are mounts read from ``/proc/self/mountinfo``, the same reading the node's start
    uses (:func:`.host.parse_cgroup_mounts`): stray directories in ``/sys/fs/cgroup`` count for
    neither.
    """

    euid: int
    cgroup_v2: bool
    cgroup_v2_controllers: frozenset[str] = frozenset()
    cgroup_v1_controllers: frozenset[str] = frozenset()
    cgroup_read_only: tuple[str, ...] = ()
    modules: frozenset[str] = frozenset()
    filesystems: frozenset[str] = frozenset()
    bridge_nf_sysctl: bool = False
    executables: dict[str, str] = field(default_factory=dict)
    busybox_static: bool | None = None


@dataclass(frozen=True)
class Requirement:
    """One thing a real node needs: whether the host has it, what was found, and how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


# --- pure -------------------------------------------------------------------------------------------------


def parse_cgroup_v1_controllers(mountinfo: str) -> frozenset[str]:
    """The controllers of every cgroup v1 hierarchy mounted under ``/sys/fs/cgroup`` in
    ``/proc/self/mountinfo`` text (:func:`.host.parse_cgroup_mounts`; named hierarchies such as
    ``name=systemd`` and mount flags are not controllers)."""
    return frozenset(c for m in host.parse_cgroup_mounts(mountinfo) if m.version == 1 for c in m.controllers)


def parse_proc_modules(text: str) -> frozenset[str]:
    """Module names (first field) in ``/proc/modules``."""
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip())


def parse_filesystems(text: str) -> frozenset[str]:
    """Filesystem names in ``/proc/filesystems`` (the last field: ``nodev\\toverlay`` -> ``overlay``)."""
    return frozenset(line.split()[-1] for line in text.splitlines() if line.strip())


def elf_is_static(header: bytes) -> bool:
    """True for an ELF executable without a program interpreter (static, or static-pie).

    ``header`` is the file's beginning, enough to hold its program headers (they follow the ELF
    header; 64 KiB is plenty). Anything that is not ELF (a script, a truncated file) is False.
    """
    if len(header) < 52 or header[:4] != b"\x7fELF" or header[4] not in (1, 2) or header[5] not in (1, 2):
        return False
    order = "<" if header[5] == 1 else ">"
    if header[4] == 2:  # ELFCLASS64
        if len(header) < 64:
            return False
        (phoff,) = struct.unpack_from(order + "Q", header, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 0x36)
    else:
        (phoff,) = struct.unpack_from(order + "I", header, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 0x2A)
    if phnum == 0 or phentsize < 4 or phoff + phnum * phentsize > len(header):
        return False
    pt_interp = 3
    return all(struct.unpack_from(order + "I", header, phoff + i * phentsize)[0] != pt_interp for i in range(phnum))


def _cgroups(facts: HostFacts) -> Requirement:
    if facts.cgroup_read_only:
        return Requirement(
            "cgroups",
            False,
            f"cgroup hierarchies mounted read-only: {', '.join(facts.cgroup_read_only)}",
            " && ".join(f"mount -o remount,rw {p}" for p in facts.cgroup_read_only)
            + " (as root; in a container, run it with a writable cgroup filesystem)",
        )
    if facts.cgroup_v2:
        missing = [c for c in CGROUP_V2_CONTROLLERS if c not in facts.cgroup_v2_controllers]
        if missing:
            return Requirement(
                "cgroups",
                False,
                f"cgroup v2 lacks the {', '.join(missing)} controller(s)",
                "they are bound to a cgroup v1 hierarchy or not built into the kernel: boot with all controllers on "
                "cgroup v2 (systemd.unified_cgroup_hierarchy=1)",
            )
        return Requirement("cgroups", True, "cgroup v2")
    if not facts.cgroup_v1_controllers:
        return Requirement(
            "cgroups", False, "no cgroup hierarchy mounted", "mount -t cgroup2 none /sys/fs/cgroup (as root)"
        )
    missing = [c for c in CGROUP_V1_CONTROLLERS if c not in facts.cgroup_v1_controllers]
    if missing:
        mounts = " && ".join(
            f"mkdir -p /sys/fs/cgroup/{c} && mount -t cgroup -o {c} cgroup /sys/fs/cgroup/{c}" for c in missing
        )
        return Requirement("cgroups", False, f"cgroup v1 hierarchies not mounted: {', '.join(missing)}", mounts)
    return Requirement("cgroups", True, f"cgroup v1 ({', '.join(CGROUP_V1_CONTROLLERS)} mounted)")


def _kernel(facts: HostFacts) -> list[Requirement]:
    bridge = "bridge" in facts.modules
    br_netfilter = "br_netfilter" in facts.modules or facts.bridge_nf_sysctl
    overlay = "overlay" in facts.modules or "overlay" in facts.filesystems
    return [
        Requirement("bridge", True, "bridge available")
        if bridge
        else Requirement("bridge", False, "bridge module not loaded", "modprobe bridge"),
        Requirement("br_netfilter", True, "br_netfilter available")
        if br_netfilter
        else Requirement("br_netfilter", False, "br_netfilter module not loaded", "modprobe br_netfilter"),
        Requirement("overlay", True, "overlay filesystem available")
        if overlay
        else Requirement("overlay", False, "overlay filesystem not available", "modprobe overlay"),
    ]


def _program(facts: HostFacts, name: str, package: str) -> Requirement:
    path = facts.executables.get(name)
    if path is None:
        return Requirement(name, False, f"{name} missing", f"apt-get install -y {package}")
    return Requirement(name, True, f"{name} at {path}")


def _cni(facts: HostFacts) -> Requirement:
    missing = [p for p in CNI_PLUGINS if str(CNI_BIN_DIR / p) not in facts.executables]
    if missing:
        return Requirement(
            "CNI plugins",
            False,
            f"CNI plugins missing in {CNI_BIN_DIR}: {', '.join(missing)}",
            "apt-get install -y containernetworking-plugins",
        )
    return Requirement("CNI plugins", True, f"{', '.join(CNI_PLUGINS)} in {CNI_BIN_DIR}")


def _busybox(facts: HostFacts) -> Requirement:
    fix = "apt-get install -y busybox-static"
    if facts.busybox_static is None:
        return Requirement("busybox-static", False, f"{BUSYBOX} missing", fix)
    if not facts.busybox_static:
        return Requirement(
            "busybox-static",
            False,
            f"{BUSYBOX} is dynamically linked (Debian's busybox; the workload image has no C library)",
            fix,
        )
    return Requirement("busybox-static", True, f"{BUSYBOX} is static")


def evaluate(facts: HostFacts) -> list[Requirement]:
    """Every requirement of a real node, met or not, in a stable order."""
    root = (
        Requirement("root", True, "running as root")
        if facts.euid == 0
        else Requirement(
            "root",
            False,
            f"not running as root (euid {facts.euid})",
            "run as root (sudo -E): the kubelet and containerd mount, manage cgroups and set iptables rules",
        )
    )
    return [
        root,
        _cgroups(facts),
        *_kernel(facts),
        _program(facts, "runc", "runc"),
        _program(facts, "iptables", "iptables"),
        _cni(facts),
        _busybox(facts),
    ]


def usable(reqs: list[Requirement]) -> bool:
    """Whether a real node can run here (every requirement met)."""
    return all(r.ok for r in reqs)


def summary(reqs: list[Requirement]) -> str:
    """One line: ``real nodes unavailable: runc missing (apt-get install -y runc); ...``."""
    missing = [f"{r.detail} ({r.fix})" if r.fix else r.detail for r in reqs if not r.ok]
    if not missing:
        return "real nodes available"
    return "real nodes unavailable: " + "; ".join(missing)


def require_usable() -> None:
    """Raise one :class:`HarnessError` naming everything this host lacks for a real node (all of
    it at once, each with its fix); return quietly when nothing is missing."""
    reqs = evaluate(gather_facts())
    if not usable(reqs):
        raise HarnessError(summary(reqs), "install what is named, or run without real nodes")


def subnet_conflicts(cidr: str, routes_text: str) -> list[str]:
    """Routes in ``ip -4 route`` output (the main table) that overlap the node bridge's ``cidr``.

    The default route is not a conflict (every subnet is inside 0.0.0.0/0); a route type word
    (``blackhole``, ``unreachable``...) before the destination is skipped; a destination without a
    prefix length is one address. A bad ``cidr`` is a :class:`HarnessError`.
    """
    try:
        wanted = ipaddress.IPv4Network(cidr, strict=False)
    except ValueError as exc:
        raise HarnessError(f"the node bridge subnet {cidr!r} is not an IPv4 CIDR", "give it like 10.88.0.0/24") from exc
    return [
        f"{cidr} overlaps {network} (route: {raw})"
        for network, raw in route_destinations(routes_text)
        if network.overlaps(wanted)
    ]


def route_destinations(routes_text: str) -> list[tuple[ipaddress.IPv4Network, str]]:
    """The destinations of the routes in ``ip -4 route`` output, each with its line (the default
    route and lines that name no destination left out; see :func:`subnet_conflicts`)."""
    found = []
    for raw in routes_text.splitlines():
        words = raw.split()
        if words and words[0] in _ROUTE_TYPES:
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            found.append((ipaddress.IPv4Network(words[0], strict=False), raw.strip()))
        except ValueError:
            continue
    return found


# --- readers ----------------------------------------------------------------------------------------------


def port_free(port: int, host: str = "0.0.0.0") -> bool:
    """True when a server could bind ``host:port`` now (0.0.0.0 collides with a listener on any address).

    SO_REUSEADDR as every server sets it, so connections lingering in TIME_WAIT do not count. Any
    other bind error (an address not on this host) is raised: it is no answer about the port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _which(name: str) -> str | None:
    search = os.pathsep.join([os.environ.get("PATH", ""), *EXTRA_PATH])
    return shutil.which(name, path=search)


def gather_facts() -> HostFacts:
    """Read what :func:`evaluate` needs from this host (no changes, no root needed)."""
    cgroup_root = Path("/sys/fs/cgroup")
    v2 = (cgroup_root / "cgroup.controllers").exists()
    try:
        sys_modules = frozenset(os.listdir("/sys/module"))
    except OSError:
        sys_modules = frozenset()
    executables = {}
    for name in ("runc", "iptables"):
        found = _which(name)
        if found is not None:
            executables[name] = found
    for plugin in CNI_PLUGINS:
        path = CNI_BIN_DIR / plugin
        if os.access(path, os.X_OK):
            executables[str(path)] = str(path)
    busybox_static: bool | None = None
    if os.access(BUSYBOX, os.X_OK):
        try:
            with BUSYBOX.open("rb") as f:
                busybox_static = elf_is_static(f.read(65536))
        except OSError:
            busybox_static = None
    mountinfo = _read(Path("/proc/self/mountinfo"))
    return HostFacts(
        euid=os.geteuid(),
        cgroup_v2=v2,
        cgroup_v2_controllers=frozenset(_read(cgroup_root / "cgroup.controllers").split()) if v2 else frozenset(),
        cgroup_v1_controllers=frozenset() if v2 else parse_cgroup_v1_controllers(mountinfo),
        cgroup_read_only=tuple(m.path for m in host.parse_cgroup_mounts(mountinfo, str(cgroup_root)) if m.read_only),
        modules=parse_proc_modules(_read(Path("/proc/modules"))) | sys_modules,
        filesystems=parse_filesystems(_read(Path("/proc/filesystems"))),
        bridge_nf_sysctl=Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists(),
        executables=executables,
        busybox_static=busybox_static,
    )
