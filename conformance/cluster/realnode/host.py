"""The host-wide state a real node changes: a snapshot, a diff, and a plan to put it back.

A kwok node lives in the harness's own processes; a real node does not. The kubelet, containerd,
the runc shims and the CNI plugins change the machine itself: sysctls (``vm.overcommit_memory``,
``kernel.panic``, ``net.ipv4.ip_forward``...), iptables chains and nft tables, ``kubepods`` cgroups
in every hierarchy, bind/overlay/tmpfs/netns mounts, the bridge link, directories with hard-coded
paths (``/run/containerd``, ``/var/lib/cni``), and shims and containers that outlive a SIGKILL of
the daemons that started them (see ``shared/notes/real-node.md``). None of it goes away when the
harness's processes do.

So ``up`` takes a :class:`HostSnapshot` before it changes anything and saves it as JSON; teardown
(or a sweep after a crash, from that file) takes another, and :func:`diff` says what differs, one
human line each. :func:`restore_plan` turns the difference into ordered :class:`Action` s that
undo only what was *added or changed* since the first snapshot, never anything that was there
before; :func:`apply` runs them and reports each one that failed instead of stopping. A test
asserts the diff is empty after teardown.

The snapshot is host-wide, not per node: with two real nodes up, a snapshot taken before the
first one covers both, and a plan from the second one's snapshot would also undo the first.

Decisions (parsing, diffing, planning) are pure functions on text and snapshots; the readers of
``/proc``, ``/sys`` and the iptables/nft tools are thin, and a missing tool is recorded as
unavailable rather than raised: a host without nft has no nft tables to leak.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from conformance.cluster.errors import HarnessError

SYSCTLS = (
    "vm.overcommit_memory",
    "kernel.panic",
    "kernel.panic_on_oops",
    "net.ipv4.ip_forward",
    "net.bridge.bridge-nf-call-iptables",
)
"""The sysctls the kubelet and the CNI bridge plugin set (the last exists only with br_netfilter)."""

IPTABLES_FAMILIES = ("iptables", "ip6tables")
"""The iptables commands snapshotted; each is dumped with ``<family>-save``."""

BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})
"""The built-in chains of every iptables table: never deleted, and not compared as chains (with
iptables-legacy a table, once its module is loaded, stays listed with its empty built-ins)."""

CGROUP_SEARCH_DEPTH = 3
"""How deep below each hierarchy's root a ``kubepods*`` or own cgroup root is looked for (the
kubelet's ``cgroupRoot`` may be nested); below a match, every descendant is recorded."""

SNAPSHOT_VERSION = 1

Runner = Callable[[Sequence[str]], str]
"""Runs an argv and returns its stdout; raises FileNotFoundError when the program is missing and
``subprocess.CalledProcessError`` when it fails."""

ActionKind = Literal["kill", "umount", "rmdir", "iptables", "nft", "link", "remove", "sysctl"]
ChangeKind = Literal["added", "removed", "changed"]


@dataclass(frozen=True)
class Netfilter:
    """One ``iptables-save`` (or ``ip6tables-save``) dump: chain names and rules per table.

    A rule is its ``-A CHAIN ...`` line as printed, which is also what ``-D`` needs to delete it.
    """

    chains: dict[str, frozenset[str]] = field(default_factory=dict)
    rules: dict[str, frozenset[str]] = field(default_factory=dict)
    # table -> built-in chain -> policy (ACCEPT, DROP): Docker sets the FORWARD policy to DROP.
    policies: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class HostSnapshot:
    """The host-wide state a real node can change, at one moment.

    ``iptables`` is keyed by command family (``iptables``, ``ip6tables``) and holds only the
    families whose save tool ran; ``unavailable`` says, per tool, why it did not (a missing tool or
    one that refused, e.g. without root). ``processes`` are ``(pid, executable)`` pairs.
    """

    sysctls: dict[str, str] = field(default_factory=dict)
    iptables: dict[str, Netfilter] = field(default_factory=dict)
    nft_tables: frozenset[str] = frozenset()
    cgroups: frozenset[str] = frozenset()
    mounts: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()
    paths: frozenset[str] = frozenset()
    processes: frozenset[tuple[int, str]] = frozenset()
    unavailable: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """The snapshot as JSON (sorted, stable), for the file ``up`` writes."""
        doc: dict[str, Any] = {
            "version": SNAPSHOT_VERSION,
            "sysctls": dict(sorted(self.sysctls.items())),
            "iptables": {
                family: {
                    "chains": {table: sorted(chains) for table, chains in sorted(nf.chains.items())},
                    "rules": {table: sorted(rules) for table, rules in sorted(nf.rules.items())},
                    "policies": {table: dict(sorted(p.items())) for table, p in sorted(nf.policies.items())},
                }
                for family, nf in sorted(self.iptables.items())
            },
            "nft_tables": sorted(self.nft_tables),
            "cgroups": sorted(self.cgroups),
            "mounts": sorted(self.mounts),
            "links": sorted(self.links),
            "paths": sorted(self.paths),
            "processes": [[pid, exe] for pid, exe in sorted(self.processes)],
            "unavailable": dict(sorted(self.unavailable.items())),
        }
        return json.dumps(doc, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> HostSnapshot:
        """Read a snapshot written by :meth:`to_json`; a damaged one is a :class:`HarnessError`."""
        try:
            doc = json.loads(text)
            if doc.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"version {doc.get('version')!r}, expected {SNAPSHOT_VERSION}")
            return cls(
                sysctls={str(k): str(v) for k, v in doc["sysctls"].items()},
                iptables={
                    str(family): Netfilter(
                        chains={str(t): frozenset(map(str, c)) for t, c in nf["chains"].items()},
                        rules={str(t): frozenset(map(str, r)) for t, r in nf["rules"].items()},
                        policies={
                            str(t): {str(c): str(v) for c, v in p.items()} for t, p in nf.get("policies", {}).items()
                        },
                    )
                    for family, nf in doc["iptables"].items()
                },
                nft_tables=frozenset(map(str, doc["nft_tables"])),
                cgroups=frozenset(map(str, doc["cgroups"])),
                mounts=frozenset(map(str, doc["mounts"])),
                links=frozenset(map(str, doc["links"])),
                paths=frozenset(map(str, doc["paths"])),
                processes=frozenset((int(pid), str(exe)) for pid, exe in doc["processes"]),
                unavailable={str(k): str(v) for k, v in doc["unavailable"].items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HarnessError(
                f"the host snapshot is not readable: {exc}",
                "it is written when a real node comes up; without it nothing can tell what the node added. "
                "Compare the host by hand (iptables-save, mounts, /sys/fs/cgroup/*/kubepods) or reboot it",
            ) from exc


# --- parsers (pure) ---------------------------------------------------------------------------------------


def _iptables_lines(text: str) -> Iterable[tuple[str, str]]:
    """``(table, line)`` for every chain declaration and rule in an iptables-save dump."""
    table = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            table = line[1:].strip()
        elif line == "COMMIT":
            table = ""
        elif table:
            yield table, re.sub(r"^\[\d+:\d+\]\s+", "", line)  # counters, as `iptables-save -c` prints them


def parse_iptables_save(text: str) -> dict[str, frozenset[str]]:
    """Chain names per table in ``iptables-save`` output (built-in chains included)."""
    chains: dict[str, set[str]] = {}
    for table, line in _iptables_lines(text):
        entry = chains.setdefault(table, set())
        if line.startswith(":"):
            entry.add(line[1:].split()[0])
    return {table: frozenset(names) for table, names in chains.items()}


def parse_iptables_policies(text: str) -> dict[str, dict[str, str]]:
    """The policy of every built-in chain per table in ``iptables-save`` output (``:FORWARD DROP``)."""
    policies: dict[str, dict[str, str]] = {}
    for table, line in _iptables_lines(text):
        if line.startswith(":"):
            words = line[1:].split()
            if len(words) >= 2 and words[1] != "-":
                policies.setdefault(table, {})[words[0]] = words[1]
    return policies


def parse_iptables_rules(text: str) -> dict[str, frozenset[str]]:
    """Rules per table in ``iptables-save`` output, each its ``-A CHAIN ...`` line as printed."""
    rules: dict[str, set[str]] = {}
    for table, line in _iptables_lines(text):
        entry = rules.setdefault(table, set())
        if line.startswith("-A "):
            entry.add(line)
    return {table: frozenset(lines) for table, lines in rules.items()}


def parse_nft_tables(text: str) -> frozenset[str]:
    """``family name`` of every table in ``nft list tables`` output (``table ip filter`` -> ``ip filter``)."""
    tables = set()
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "table":
            tables.add(f"{words[1]} {words[2]}")
    return frozenset(tables)


def _unescape_mountinfo(field_text: str) -> str:
    """Undo the kernel's octal escapes in a mountinfo field (``\\040`` space, ``\\011`` tab, ``\\012``, ``\\134``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field_text)


def parse_mountinfo(text: str) -> frozenset[str]:
    """Mount points in ``/proc/<pid>/mountinfo`` (field 5, unescaped).

    A mount stacked on a point that was already a mount point is the same point: the set does not
    show it (the kubelet's and containerd's mounts are on points of their own).
    """
    points = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            points.add(_unescape_mountinfo(fields[4]))
    return frozenset(points)


# --- diff (pure) ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One difference between two snapshots."""

    category: str  # sysctl, tool, iptables, ip6tables, nft, cgroup, mount, link, path, process
    item: str
    kind: ChangeKind
    before: str = ""
    after: str = ""

    def line(self) -> str:
        """One line for a person: ``iptables filter chain KUBE-FIREWALL added``."""
        if self.category == "sysctl":
            if self.kind == "changed":
                return f"sysctl {self.item}: {self.before} -> {self.after} (was {self.before} before up)"
            if self.kind == "added":
                return f"sysctl {self.item} appeared: {self.after} (absent before up)"
            return f"sysctl {self.item} disappeared (was {self.before} before up)"
        if self.category == "tool":
            return f"{self.item}: {self.before} before up, {self.after} now; not compared"
        return f"{self.category} {self.item} {self.kind}"


@dataclass(frozen=True)
class HostDiff:
    """What differs between a snapshot taken before ``up`` and one taken later."""

    changes: tuple[Change, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.changes

    def lines(self) -> list[str]:
        return [change.line() for change in self.changes]

    def of(self, category: str) -> tuple[Change, ...]:
        """The changes in one category."""
        return tuple(change for change in self.changes if change.category == category)


def _set_changes(category: str, before: Iterable[str], after: Iterable[str]) -> list[Change]:
    b, a = set(before), set(after)
    return [Change(category, item, "added") for item in sorted(a - b)] + [
        Change(category, item, "removed") for item in sorted(b - a)
    ]


def _availability(snapshot: HostSnapshot, tool: str) -> str:
    reason = snapshot.unavailable.get(tool)
    return f"unavailable ({reason})" if reason is not None else "available"


def _netfilter_items(nf: Netfilter) -> set[str]:
    chains = {f"{table} chain {c}" for table, names in nf.chains.items() for c in names if c not in BUILTIN_CHAINS}
    rules = {f"{table} rule {r}" for table, lines in nf.rules.items() for r in lines}
    # A table made after up has ACCEPT policies, as one never made: only other policies are items.
    policies = {f"{t} policy {c} {p}" for t, of in nf.policies.items() for c, p in of.items() if p != "ACCEPT"}
    return chains | rules | policies


def diff(before: HostSnapshot, after: HostSnapshot) -> HostDiff:
    """Every difference, per category: added and removed items, changed sysctl values.

    A tool unavailable in either snapshot is not compared; if its availability differs that is one
    ``tool`` line (a host that lost or gained iptables between ``up`` and teardown is worth a word).
    """
    changes: list[Change] = []
    for name in sorted(before.sysctls.keys() | after.sysctls.keys()):
        was, now = before.sysctls.get(name), after.sysctls.get(name)
        if was is None and now is not None:
            changes.append(Change("sysctl", name, "added", after=now))
        elif was is not None and now is None:
            changes.append(Change("sysctl", name, "removed", before=was))
        elif was is not None and now is not None and was != now:
            changes.append(Change("sysctl", name, "changed", before=was, after=now))
    for tool in [*IPTABLES_FAMILIES, "nft"]:
        was_state, now_state = _availability(before, tool), _availability(after, tool)
        if (was_state == "available") != (now_state == "available"):
            changes.append(Change("tool", tool, "changed", before=was_state, after=now_state))
    for family in IPTABLES_FAMILIES:
        if family in before.iptables and family in after.iptables:
            changes += _set_changes(
                family, _netfilter_items(before.iptables[family]), _netfilter_items(after.iptables[family])
            )
    if "nft" not in before.unavailable and "nft" not in after.unavailable:
        changes += _set_changes(
            "nft", (f"table {t}" for t in before.nft_tables), (f"table {t}" for t in after.nft_tables)
        )
    changes += _set_changes("cgroup", before.cgroups, after.cgroups)
    changes += _set_changes("mount", before.mounts, after.mounts)
    changes += _set_changes("link", before.links, after.links)
    changes += _set_changes("path", before.paths, after.paths)
    changes += _set_changes(
        "process", (f"{pid} {exe}" for pid, exe in before.processes), (f"{pid} {exe}" for pid, exe in after.processes)
    )
    return HostDiff(tuple(changes))


# --- restore plan (pure) ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One step of a teardown: an argv to run, or (for ``sysctl``) a value to write back."""

    kind: ActionKind
    target: str
    why: str
    argv: tuple[str, ...] = ()
    value: str = ""

    def describe(self) -> str:
        how = shlex.join(self.argv) if self.argv else f"write {self.value!r}"
        return f"{self.kind} {self.target} ({self.why}): {how}"


def _depth(path: str) -> int:
    return len(PurePosixPath(path).parts)


def _deepest_first(paths: Iterable[str]) -> list[str]:
    return sorted(paths, key=lambda p: (-_depth(p), p))


def _iptables_actions(family: str, before: Netfilter, after: Netfilter) -> list[Action]:
    actions: list[Action] = []
    for table in sorted(after.chains.keys() | after.rules.keys()):
        was_chains = before.chains.get(table, frozenset())
        new_chains = sorted(c for c in after.chains.get(table, frozenset()) - was_chains if c not in BUILTIN_CHAINS)
        base = (family, "-w", "-t", table)
        # Rules added to chains that stay (built-ins, pre-existing ones): delete each; rules in new
        # chains go with the flush. Every reference to a new chain is then gone, so -X succeeds.
        for rule in sorted(after.rules.get(table, frozenset()) - before.rules.get(table, frozenset())):
            argv = shlex.split(rule)
            if len(argv) < 2 or argv[1] in new_chains:
                continue
            actions.append(Action("iptables", f"{table} {rule}", "rule added after up", (*base, "-D", *argv[1:])))
        actions += [Action("iptables", f"{table} {c}", "chain created after up", (*base, "-F", c)) for c in new_chains]
        actions += [Action("iptables", f"{table} {c}", "chain created after up", (*base, "-X", c)) for c in new_chains]
    for table in sorted(after.policies):
        for chain, now in sorted(after.policies[table].items()):
            was = before.policies.get(table, {}).get(chain, "ACCEPT")
            if now != was:
                why = f"policy {now} now, {was} before up"
                actions.append(Action("iptables", f"{table} {chain}", why, (*base_of(family, table), "-P", chain, was)))
    return actions


def base_of(family: str, table: str) -> tuple[str, ...]:
    """The start of an ``iptables`` command line acting on ``table`` (pure)."""
    return (family, "-w", "-t", table)


def restore_plan(before: HostSnapshot, after: HostSnapshot) -> list[Action]:
    """The actions that undo what was added or changed since ``before``, in a safe teardown order.

    Kill processes (they hold mounts and cgroups), unmount deepest first, remove cgroups deepest
    first, delete iptables rules then flush and delete chains (per table), delete nft tables (after
    iptables: with iptables-nft its tables are nft tables), delete links, remove paths deepest
    first, write sysctls back last. Nothing present in ``before`` is touched, and nothing is put
    back that went missing (the diff reports those). A tool unavailable in either snapshot plans
    nothing for its category: what existed before is unknown.
    """
    actions: list[Action] = [
        Action(
            "kill", str(pid), f"started after up ({exe or 'executable unreadable'})", ("kill", "-KILL", str(pid)), exe
        )
        for pid, exe in sorted(after.processes - before.processes)
    ]
    actions += [
        Action("umount", point, "mounted after up", ("umount", point))
        for point in _deepest_first(after.mounts - before.mounts)
    ]
    actions += [
        Action("rmdir", path, "cgroup created after up", ("rmdir", path))
        for path in _deepest_first(after.cgroups - before.cgroups)
    ]
    for family in IPTABLES_FAMILIES:
        if family in before.iptables and family in after.iptables:
            actions += _iptables_actions(family, before.iptables[family], after.iptables[family])
    if "nft" not in before.unavailable and "nft" not in after.unavailable:
        actions += [
            Action("nft", table, "table created after up", ("nft", "delete", "table", *table.split()))
            for table in sorted(after.nft_tables - before.nft_tables)
        ]
    actions += [
        Action("link", name, "link created after up", ("ip", "link", "delete", name))
        for name in sorted(after.links - before.links)
    ]
    actions += [
        Action("remove", path, "created after up", ("rm", "-rf", "--one-file-system", "--", path))
        for path in _deepest_first(after.paths - before.paths)
    ]
    for name in sorted(before.sysctls.keys() & after.sysctls.keys()):
        was, now = before.sysctls[name], after.sysctls[name]
        if was != now:
            actions.append(Action("sysctl", name, f"was {was} before up, {now} now", value=was))
    return actions


# --- readers and the applier (imperative shell) -----------------------------------------------------------


def run_command(argv: Sequence[str]) -> str:
    """Run ``argv`` and return its stdout (the default :data:`Runner`)."""
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=60).stdout


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        output = (exc.stderr or exc.stdout or "").strip()
        return f"exit status {exc.returncode}" + (f": {output}" if output else "")
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename} not found"
    return str(exc) or type(exc).__name__


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _exe_of(proc: Path, pid: int) -> str | None:
    """The executable of ``pid``, or None when it is gone (or a kernel thread, or unreadable)."""
    try:
        return os.readlink(proc / str(pid) / "exe")
    except OSError:
        return None


def _under(exe: str, dirs: Sequence[Path]) -> bool:
    path = Path(exe.removesuffix(" (deleted)"))
    return any(path.is_relative_to(d) for d in dirs)


def _pids(proc: Path) -> list[int]:
    try:
        return [int(entry.name) for entry in os.scandir(proc) if entry.name.isdigit()]
    except OSError:
        return []


@dataclass(frozen=True)
class CgroupMount:
    """One cgroup hierarchy as ``/proc/self/mountinfo`` shows it: where it is mounted, v1 or v2, its
    controllers (v1: the super options without flags and ``name=``; v2: none listed here) and
    whether it is mounted read-only (then no cgroup can be made in it)."""

    path: str
    version: int
    controllers: frozenset[str] = frozenset()
    read_only: bool = False


_MOUNT_FLAGS = frozenset({"rw", "ro", "noprefix", "xattr", "clone_children", "nsdelegate", "memory_recursiveprot"})


def parse_cgroup_mounts(mountinfo: str, cgroup_root: str = "/sys/fs/cgroup") -> tuple[CgroupMount, ...]:
    """The cgroup hierarchies mounted at or below ``cgroup_root``, in ``/proc/self/mountinfo`` text. Pure.

    Only mounts count: a plain directory in ``/sys/fs/cgroup`` (``cpu,cpuacct``, ``net_cls,net_prio``
    left by a container runtime that expected them, on a read-only tmpfs) is no hierarchy and is not
    listed, whatever its name. A point mounted twice is the later mount (it hides the earlier one).
    Sorted by path.
    """
    root = PurePosixPath(cgroup_root)
    found: dict[str, CgroupMount] = {}
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, words = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(words) < 3 or words[0] not in ("cgroup", "cgroup2"):
            continue
        point = _unescape_mountinfo(fields[4])
        if not PurePosixPath(point).is_relative_to(root):
            continue
        options = set(fields[5].split(",")) | set(words[2].split(","))
        version = 2 if words[0] == "cgroup2" else 1
        controllers = (
            frozenset(o for o in words[2].split(",") if o and "=" not in o and o not in _MOUNT_FLAGS)
            if version == 1
            else frozenset()
        )
        found[point] = CgroupMount(point, version, controllers, read_only="ro" in options)
    return tuple(found[p] for p in sorted(found))


CGROUP_FS = "/sys/fs/cgroup"


def cgroup_hierarchies(cgroup_root: Path, mountinfo: str | None = None) -> list[Path]:
    """The root of every cgroup hierarchy mounted at or below ``/sys/fs/cgroup``: the unified root
    (v2), or each v1 mount (and the hybrid layout's ``unified``), read from ``mountinfo`` (default:
    this process's ``/proc/self/mountinfo``), never from the directory listing. Each is given
    below ``cgroup_root`` (``/sys/fs/cgroup`` itself but in tests, which read a made-up tree)."""
    text = mountinfo if mountinfo is not None else (_read_text(Path("/proc/self/mountinfo")) or "")
    return [cgroup_root / PurePosixPath(m.path).relative_to(CGROUP_FS) for m in parse_cgroup_mounts(text, CGROUP_FS)]


def cgroup_mounts(mountinfo: str) -> list[str]:
    """The mount point of every cgroup (v1) and cgroup2 hierarchy at or below ``/sys/fs/cgroup`` in
    ``mountinfo`` text, sorted (pure): :func:`parse_cgroup_mounts`' paths."""
    return [m.path for m in parse_cgroup_mounts(mountinfo, CGROUP_FS)]


def _walk_cgroups(directory: Path, names: frozenset[str], depth: int, matched: bool, found: set[str]) -> None:
    try:
        children = [e for e in os.scandir(directory) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for child in children:
        hit = matched or child.name.startswith("kubepods") or child.name in names
        if hit:
            found.add(child.path)
        if hit or depth < CGROUP_SEARCH_DEPTH:
            _walk_cgroups(Path(child.path), names, depth + 1, hit, found)


def _netfilter(family: str, run: Runner, unavailable: dict[str, str]) -> Netfilter | None:
    try:
        text = run([f"{family}-save"])
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable[family] = _error_text(exc)
        return None
    return Netfilter(parse_iptables_save(text), parse_iptables_rules(text), parse_iptables_policies(text))


def take_snapshot(
    watched_paths: Iterable[str | Path],
    process_dirs: Iterable[str | Path],
    cgroup_names: Iterable[str] = (),
    run: Runner = run_command,
    *,
    proc: Path = Path("/proc"),
    sysfs: Path = Path("/sys"),
) -> HostSnapshot:
    """Read the host's state now.

    ``watched_paths``: files and directories recorded when they exist (``/run/containerd``,
    ``/var/lib/cni``...). ``process_dirs``: a process counts when its executable is one of them or
    lies under one (name the real-node executables themselves when their directory holds other
    programs, such as a control plane's: those must never count); processes in a recorded cgroup count as well, so
    containers whose shim was killed are found. ``cgroup_names``: the nodes' own cgroup roots,
    recorded (with every descendant) beside ``kubepods*`` in each hierarchy. iptables-save,
    ip6tables-save and nft are run through ``run``; one that is missing or fails is recorded in
    ``unavailable``.
    """
    sysctls = {}
    for name in SYSCTLS:
        value = _read_text(proc / "sys" / name.replace(".", "/"))
        if value is not None:
            sysctls[name] = value.strip()

    unavailable: dict[str, str] = {}
    iptables = {}
    for family in IPTABLES_FAMILIES:
        nf = _netfilter(family, run, unavailable)
        if nf is not None:
            iptables[family] = nf
    nft_tables: frozenset[str] = frozenset()
    try:
        nft_tables = parse_nft_tables(run(["nft", "list", "tables"]))
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable["nft"] = _error_text(exc)

    mountinfo = _read_text(proc / "self" / "mountinfo") or ""
    cgroups: set[str] = set()
    for hierarchy in cgroup_hierarchies(sysfs / "fs" / "cgroup", mountinfo):
        _walk_cgroups(hierarchy, frozenset(cgroup_names), 1, False, cgroups)

    dirs = [p for d in process_dirs for p in {Path(d), Path(d).resolve()}]  # exe links are resolved paths
    processes = set()
    for pid in _pids(proc):
        exe = _exe_of(proc, pid)
        if exe is not None and _under(exe, dirs):
            processes.add((pid, exe))
    for cgroup in cgroups:
        for line in (_read_text(Path(cgroup) / "cgroup.procs") or "").split():
            exe = _exe_of(proc, int(line))
            if exe is not None or (proc / line).exists():
                processes.add((int(line), exe or ""))

    try:
        links = frozenset(os.listdir(sysfs / "class" / "net"))
    except OSError:
        links = frozenset()

    return HostSnapshot(
        sysctls=sysctls,
        iptables=iptables,
        nft_tables=nft_tables,
        cgroups=frozenset(cgroups),
        mounts=parse_mountinfo(mountinfo),
        links=links,
        paths=frozenset(str(p) for p in watched_paths if os.path.lexists(p)),
        processes=frozenset(processes),
        unavailable=unavailable,
    )


@dataclass(frozen=True)
class Failure:
    """An action that did not succeed, with why."""

    action: Action
    error: str

    def line(self) -> str:
        return f"{self.action.describe()} failed: {self.error}"


def _still_there(action: Action, proc: Path = Path("/proc"), sysfs: Path = Path("/sys")) -> bool:
    """Whether ``action`` still has something to do: a process gone (or its pid reused by another
    executable), a link gone with its network namespace, a path or mount already removed is done."""
    if action.kind == "kill":
        return _exe_of(proc, int(action.target)) == action.value or (
            action.value == "" and (proc / action.target).exists()
        )
    if action.kind == "umount":
        return action.target in parse_mountinfo(_read_text(proc / "self" / "mountinfo") or "")
    if action.kind == "link":
        return os.path.lexists(sysfs / "class" / "net" / action.target)
    if action.kind in ("rmdir", "remove"):
        return os.path.lexists(action.target)
    return True


def _umount(action: Action, run: Runner, still_there: Callable[[Action], bool], busy_wait: float) -> None:
    """Unmount, retrying a busy mount until ``busy_wait`` has passed, then detaching it lazily; raises the
    lazy attempt's error when that fails too."""
    deadline = time.monotonic() + busy_wait
    while True:
        try:
            run(action.argv)
            return
        except (OSError, subprocess.SubprocessError):
            if not still_there(action):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
    run(("umount", "--lazy", action.target))


def _write_sysctl(name: str, value: str) -> None:
    Path("/proc/sys", *name.split(".")).write_text(value + "\n")


def apply(
    actions: Sequence[Action],
    run: Runner = run_command,
    *,
    still_there: Callable[[Action], bool] = _still_there,
    write_sysctl: Callable[[str, str], None] = _write_sysctl,
    kill_wait: float = 5.0,
    busy_wait: float = 10.0,
) -> list[Failure]:
    """Carry out ``actions`` in order, going on after a failure; return the ones that failed.

    An action whose object is already gone is skipped (see ``still_there``), and one that fails
    because its object went meanwhile is no failure (the goal is reached). After the kills, it
    waits up to ``kill_wait`` seconds for the processes to exit, since their mounts and cgroups
    cannot go before they do. A mount still busy (a killed container's last file closing, under
    load, after the processes are gone) is retried for up to ``busy_wait`` seconds, then detached
    lazily (``umount --lazy``: gone from the mount table at once, freed by the kernel when its last
    user closes it), which is what the host's mount table must show.
    """
    failures: list[Failure] = []
    killed: list[Action] = []
    for index, action in enumerate(actions):
        if not still_there(action):
            continue
        try:
            if action.kind == "sysctl":
                write_sysctl(action.target, action.value)
            elif action.kind == "umount":
                _umount(action, run, still_there, busy_wait)
            else:
                run(action.argv)
        except (OSError, subprocess.SubprocessError) as exc:
            if still_there(action):  # gone meanwhile (a container dies with its shim): done, not failed
                failures.append(Failure(action, _error_text(exc)))
        if action.kind == "kill":
            killed.append(action)
            if index + 1 == len(actions) or actions[index + 1].kind != "kill":
                deadline = time.monotonic() + kill_wait
                while any(still_there(a) for a in killed) and time.monotonic() < deadline:
                    time.sleep(0.05)
    return failures
