"""The embedded cluster provider: real control-plane binaries plus kwok, on this machine.

``up`` makes the binaries ready (building them once), creates the run directory, starts the
supervisor (:mod:`.supervisor`) in its own session and relays its progress until the cluster is
ready. ``down`` asks the supervisor to stop and waits until its processes and run directory are
gone, killing what remains if it does not answer. Stale run directories (a supervisor that was
SIGKILLed) are swept on every ``up`` and by ``cluster sweep``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from ..binaries import BinaryCache, BinarySet
from ..declared import RealNodes
from ..errors import HarnessError
from ..faults import PULL_FAILS_REGISTRY, Fault, FaultInjector
from ..paths import runs_root
from ..provider import ClusterInfo, Progress, Provider, kwok_fault_injector, quiet
from ..realnode import preflight
from ..realnode.fleet import restore as restore_real_nodes
from ..runner_address import DETAILS_KEY as RUNNER_ADDRESS
from ..runner_address import LOOPBACK
from ..spec import ClusterSpec
from ..versions import COREDNS, PINNED
from . import dra_drivers
from .components import RunLayout
from .processes import log_tail, pid_alive

DOWN_GRACE = 3.0
NO_DNS = "DNS: no cluster DNS server (Service and EndpointSlice records are real API objects)"
SIMULATED = (
    "kubelet: kwok manages fake Nodes and Pod status; no containers run, so no logs, exec, probes or images",
    "pod networking: Pod IPs are assigned by kwok and not routable; no kube-proxy, Service VIPs do not forward",
    NO_DNS,
    "scheduler 'volcano': a kube-scheduler profile, emulated without gang semantics",
    "readiness, failures, restarts (of a container or a sidecar) and in-place image changes: kwok Stages "
    "(deterministic, on demand)",
    "readiness gates: never set by the simulated kubelet; a Pod is Ready only once every gate's condition is True",
    f"image pulls: none; an image in {PULL_FAILS_REGISTRY}/ fails its pull (ErrImagePull, then ImagePullBackOff; "
    "never Running, never Ready), also when patched into a running Pod",
)
# What a cluster with CoreDNS says instead of NO_DNS (the address is in ClusterInfo.details["dns"]).
DNS_LINE = (
    f"DNS: CoreDNS {COREDNS} (kubernetes plugin) answers the cluster's names from the API on a loopback port "
    "(`dns` in cluster status and reports); it runs outside the cluster: Pods cannot query it (no containers run) "
    "and it forwards nothing"
)


# Said when the fake DRA drivers run (a spec with device-count labels on some node pool).
REAL_NODES_LINE = (
    "real nodes: {} run containerd and a kubelet on this host (Pods there run for real, with logs, exec, "
    "probes and routable IPs); the lines above hold for the kwok nodes only"
)
DEVICES_LINE = (
    "DRA devices: fake GPU/NPU drivers (fake-devices/) publish one ResourceSlice per labelled node; "
    "the real kube-scheduler allocates them, but no kubelet plugin prepares them (no containers run)"
)


# Ports are picked free and bound a moment later by the components: a cluster starting at the same
# time may take one in between (seen with several clusters starting at once). Such a start fails
# cleanly (everything stopped, the run directory removed) and is tried again on new ports.
PORT_ATTEMPTS = 3


def port_collision(message: str) -> bool:
    """Did a start fail because a picked port was taken in the meantime? Pure."""
    return "address already in use" in message


# KTHENA_DNS=0 starts clusters without CoreDNS (and does not build it).
DNS_ENV = "KTHENA_DNS"


def dns_enabled() -> bool:
    return os.environ.get(DNS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


# In a run directory until its supervisor holds the lock: the pid of the process starting it, so a
# concurrent `up` (which sweeps first) never takes a cluster being started for a stale one.
STARTING = "starting.pid"

# Supervisors started by this process, so `down` can reap them (they are our children).
_children: dict[Path, subprocess.Popen[str]] = {}


def _being_started(run: Path) -> bool:
    """True while the process that is starting this run directory's cluster is alive."""
    try:
        pid = int((run / STARTING).read_text())
    except (OSError, ValueError):
        return False
    return pid_alive(pid)


def _lock_is_held(lock_path: Path) -> bool:
    """True while a live supervisor holds the run directory's flock."""
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def declared_real_nodes() -> RealNodes:
    """What the local provider's real nodes offer the suite: the nodes labelled real, the harness's
    workload images imported on each (:mod:`..realnode.images`)."""
    from ..realnode.config import NODE_KIND_LABEL
    from ..realnode.images import WORKLOAD_IMAGES
    from ..realnode.node import REAL_NODE_TAINT

    toleration = {"key": REAL_NODE_TAINT["key"], "operator": "Exists", "effect": REAL_NODE_TAINT["effect"]}
    return RealNodes({NODE_KIND_LABEL: "real"}, dict(WORKLOAD_IMAGES), (toleration,))


def effective_phase(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` (the supervisor's last word, plus ``live`` and ``components_alive``) with the phase
    the cluster is in now: ``dead`` when its supervisor is gone (``recordedPhase`` keeps what it last
    wrote), ``degraded`` when it lives but a component it reported is dead. Pure."""
    recorded = state.get("phase")
    if not state.get("live") and recorded not in (None, "stopped"):
        return {**state, "phase": "dead", "recordedPhase": recorded}
    dead = sorted(n for n, alive in (state.get("components_alive") or {}).items() if not alive)
    if recorded == "ready" and dead:
        return {**state, "phase": "degraded", "recordedPhase": recorded, "deadComponents": dead}
    return state


class LocalProvider(Provider):
    """Clusters made of real etcd / kube-apiserver / kube-controller-manager / kube-scheduler
    processes and kwok, each in ``<cache>/clusters/<name>/``."""

    name: ClassVar[str] = "local"
    injects: ClassVar[frozenset[Fault]] = frozenset(Fault)  # kwok stages, the embedded cluster's own
    simulates: ClassVar[tuple[str, ...]] = SIMULATED

    def __init__(self, runs: Path | None = None, cache: BinaryCache | None = None) -> None:
        self.runs = runs or runs_root()
        self.cache = cache or BinaryCache()

    def layout(self, name: str) -> RunLayout:
        return RunLayout(self.runs / name)

    # -- up -------------------------------------------------------------------------------------

    def up(self, spec: ClusterSpec, *, progress: Progress = quiet, owner_pid: int | None = None) -> ClusterInfo:
        self.check_inputs()
        self.sweep(progress=progress)
        layout = self.layout(spec.name)
        if layout.root.exists():
            existing = self.status(spec.name)
            if existing and existing.get("phase") == "ready" and existing.get("live"):
                running = ClusterSpec.model_validate_json(layout.spec.read_text())
                if running != spec:
                    raise HarnessError(
                        f"cluster '{spec.name}' is already running with a different spec",
                        f"run `kthena-conformance cluster down --name {spec.name}` first, or pick another --name",
                    )
                progress(f"cluster '{spec.name}' is already up")
                return self.info(spec.name)
            raise HarnessError(
                f"cluster '{spec.name}' is in phase {existing.get('phase') if existing else 'unknown'}",
                f"run `kthena-conformance cluster down --name {spec.name}` and try again",
            )
        if spec.real_pools():
            preflight.require_usable()  # before any build or process: a host without them fails at once
        if spec.dra_drivers:
            dra_drivers.check_drivers(spec)  # a missing program or manifest fails before anything starts
        # Optional CoreDNS: built once on demand; a failed build is not retried on every `up`
        # (`make binaries` retries it) and leaves the cluster without DNS.
        binaries = self.cache.ensure(
            progress=progress, extras=dns_enabled(), retry_failed_extras=False, real_nodes=bool(spec.real_pools())
        )
        coredns = binaries.optional("coredns") if dns_enabled() else None
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._start(spec, layout, binaries, coredns, progress, owner_pid)
            except HarnessError as exc:
                if attempt == PORT_ATTEMPTS or not port_collision(exc.message):
                    raise
                progress(
                    "a port picked for the cluster was taken by another process while it started; "
                    f"starting again on new ports (attempt {attempt + 1} of {PORT_ATTEMPTS})"
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _start(
        self,
        spec: ClusterSpec,
        layout: RunLayout,
        binaries: BinarySet,
        coredns: Path | None,
        progress: Progress,
        owner_pid: int | None,
    ) -> ClusterInfo:
        """One attempt: the run directory, the supervisor, its progress until ready (or failed,
        with everything it started stopped and the run directory removed)."""
        started = time.monotonic()
        # The run directory appears with its STARTING marker in it (a rename), never empty.
        self.runs.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}.", dir=self.runs))
        (staging / STARTING).write_text(str(os.getpid()))
        try:
            staging.rename(layout.root)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            raise HarnessError(
                f"cluster '{spec.name}' is being started by another process",
                "wait for it, or pick another --name",
            ) from None
        layout.logs.mkdir()
        layout.spec.write_text(spec.model_dump_json(indent=2))
        detach = owner_pid is None
        argv = [
            sys.executable,
            "-m",
            "conformance.cluster.local.supervisor",
            str(layout.root),
            "--bin-dir",
            str(binaries.directory),
            "--owner-pid",
            str(os.getpid() if detach else owner_pid),
            *(["--coredns", str(coredns)] if coredns else []),
        ]
        with layout.log("supervisor").open("ab") as err:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        _children[layout.root] = proc
        try:
            ready = self._relay(proc, layout, progress)
            if detach:
                proc.send_signal(signal.SIGUSR1)
                self._await_event(proc, "detached", timeout=5.0)
        except KeyboardInterrupt:  # stays an interruption (exit code 130), not a cluster failure
            progress("interrupted: tearing the cluster down")
            self._stop_supervisor(layout, proc)
            progress("interrupted: the cluster was torn down; nothing was left running")
            raise
        except BaseException:
            self._stop_supervisor(layout, proc)
            raise
        finally:
            if proc.stdout is not None and detach:
                proc.stdout.close()
        (layout.root / STARTING).unlink(missing_ok=True)  # the supervisor holds the lock now
        info = self.info(spec.name)
        self._declare(info)
        info.details["timings"] = {**ready.get("timings", {}), "up_total": round(time.monotonic() - started, 3)}
        if binaries.build_seconds is not None:
            info.details["timings"]["build"] = round(binaries.build_seconds, 1)
        return info

    def _relay(self, proc: subprocess.Popen[str], layout: RunLayout, progress: Progress) -> dict[str, Any]:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            if kind == "progress":
                progress(str(event.get("message", "")))
            elif kind == "ready":
                return dict(event)
            elif kind == "failed":
                proc.wait(timeout=15)
                raise HarnessError(str(event.get("message")), str(event.get("hint") or ""))
        code = proc.wait(timeout=15)
        tail = "\n      ".join(log_tail(layout.log("supervisor"))) or "(no output)"
        raise HarnessError(
            f"the cluster supervisor exited with code {code} before the cluster was ready:\n      {tail}",
            "this is a bug; please report it",
        )

    @staticmethod
    def _await_event(proc: subprocess.Popen[str], wanted: str, timeout: float) -> None:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        for line in proc.stdout:
            if json.loads(line).get("event") == wanted:
                return
            if time.monotonic() > deadline:
                break
        raise HarnessError(f"the cluster supervisor did not acknowledge '{wanted}'", "run `cluster down` and try again")

    # -- down -----------------------------------------------------------------------------------

    def down(self, name: str) -> bool:
        layout = self.layout(name)
        if not layout.root.exists():
            return False
        proc = _children.pop(layout.root, None)
        self._stop_supervisor(layout, proc)
        return True

    def _stop_supervisor(self, layout: RunLayout, proc: subprocess.Popen[str] | None) -> None:
        state = self._read_state(layout)
        pid = proc.pid if proc else state.get("supervisor_pid")
        if isinstance(pid, int) and pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + DOWN_GRACE
            while time.monotonic() < deadline and (layout.root.exists() or pid_alive(pid)):
                if proc is not None and proc.poll() is not None and not layout.root.exists():
                    break
                time.sleep(0.02)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self._kill_components(state)
        problems = restore_real_nodes(layout.root)  # a killed supervisor could not
        shutil.rmtree(layout.root, ignore_errors=True)
        if problems:
            raise HarnessError(
                f"cluster '{layout.root.name}' is down, but its real nodes left the host changed:\n  "
                + "\n  ".join(problems),
                "undo these by hand (the lines name each change and the command that failed)",
            )

    @staticmethod
    def _kill_components(state: dict[str, Any]) -> None:
        """SIGKILL any component still alive (they normally die with the supervisor)."""
        bin_dir = state.get("bin_dir")
        for pid in (state.get("components") or {}).values():
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if bin_dir and exe.startswith(str(bin_dir)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def sweep(self, *, progress: Progress = quiet) -> list[str]:
        """Remove run directories whose supervisor is gone (killed, or the machine rebooted)."""
        removed: list[str] = []
        if not self.runs.is_dir():
            return removed
        for run in sorted(self.runs.iterdir()):
            layout = RunLayout(run)
            if not run.is_dir() or _lock_is_held(layout.lock) or _being_started(run):
                continue
            if run in _children and _children[run].poll() is None:
                continue  # our own supervisor, still starting
            self._kill_components(self._read_state(layout))
            for line in restore_real_nodes(run):
                progress(f"cluster '{run.name}': real nodes: {line}")
            shutil.rmtree(run, ignore_errors=True)
            removed.append(run.name)
            progress(f"swept leftovers of cluster '{run.name}'")
        return removed

    # -- status ---------------------------------------------------------------------------------

    @staticmethod
    def _read_state(layout: RunLayout) -> dict[str, Any]:
        try:
            data = json.loads(layout.state.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def check_inputs(self) -> None:
        """The environment it reads is usable: ``KTHENA_CLUSTER_START_TIMEOUT`` (the supervisor's) and
        the cache directory (``KTHENA_CACHE_DIR``)."""
        from ..paths import check_cache_root
        from .supervisor import START_TIMEOUT_ENV, start_timeout

        start_timeout(os.environ.get(START_TIMEOUT_ENV))
        check_cache_root()

    def status(self, name: str) -> dict[str, Any] | None:
        layout = self.layout(name)
        if not layout.root.exists():
            return None
        state = self._read_state(layout)
        state["live"] = _lock_is_held(layout.lock)
        state["components_alive"] = {n: pid_alive(p) for n, p in (state.get("components") or {}).items()}
        return effective_phase(state)

    def info(self, name: str) -> ClusterInfo:
        state = self.status(name)
        if not state or not state.get("live") or state.get("phase") not in ("ready", "degraded"):
            raise HarnessError(
                f"no running local cluster named '{name}'",
                f"start one with `kthena-conformance cluster up --name {name}`",
            )
        spec = ClusterSpec.model_validate_json(self.layout(name).spec.read_text())
        dns = state.get("dns")
        devices = spec.device_nodes()
        versions = {"kubernetes": PINNED.kubernetes, "etcd": PINNED.etcd, "kwok": PINNED.kwok}
        return ClusterInfo(
            provider=self.name,
            name=name,
            kubeconfig=Path(state["kubeconfig"]),
            context=None,
            kubernetes_version=PINNED.kubernetes,
            simulates=tuple(DNS_LINE if line == NO_DNS and dns else line for line in self.simulates)
            + ((DEVICES_LINE,) if devices else ())
            + ((REAL_NODES_LINE.format(", ".join(state["real_nodes"])),) if state.get("real_nodes") else ()),
            details={
                "versions": {**versions, **({"coredns": COREDNS} if dns else {})},
                "timings": state.get("timings", {}),
                "nodes": spec.node_names(),
                **({"real_nodes": state["real_nodes"]} if state.get("real_nodes") else {}),
                **({"realNodes": declared_real_nodes().as_details()} if state.get("real_nodes") else {}),
                "ports": state.get("ports", {}),
                "run_dir": state.get("run_dir"),
                **({"dns": dns} if dns else {}),
                **({"fake_devices": devices} if devices else {}),
                **({"draDrivers": state["dra_drivers"]} if state.get("dra_drivers") else {}),
                # the reference and any implementation the run starts are processes on this machine
                RUNNER_ADDRESS: LOOPBACK,
            },
        )

    def load_image(self, name: str, archive: Path, *, driver: str | None = None) -> dict[str, dict[str, str]]:
        """Import ``archive`` (a docker-archive or OCI tar, e.g. ``docker save``'s) into every real
        node's containerd, so Pods there run it without a registry (pull policy IfNotPresent or
        Never); returns node -> {reference: digest} of the images it holds. With ``driver`` the
        cluster also declares the image as that DRA driver's build (``draDrivers``: reference and
        digest), which an Accelerators report then names."""
        from ..realnode.fleet import nodes_root
        from ..realnode.images import parse_ctr_images

        layout = self.layout(name)
        state = self.status(name)
        if not state or not state.get("live"):
            raise HarnessError(f"no running local cluster named '{name}'", "start it with `cluster up`")
        nodes = list(state.get("real_nodes") or [])
        if not nodes:
            raise HarnessError(
                f"cluster '{name}' has no real nodes: nothing runs images there",
                "bring it up with real nodes (cluster up --real-nodes N)",
            )
        if not archive.is_file():
            raise HarnessError(f"{archive}: no such file", "give the image's tar (docker save IMAGE -o FILE)")
        ctr = Path(state["bin_dir"]) / "ctr"
        root = nodes_root(layout.root)
        loaded: dict[str, dict[str, str]] = {}
        for node in nodes:
            base = [str(ctr), "--address", str(root / node / "containerd" / "containerd.sock"), "-n", "k8s.io"]

            def ctr_run(*args: str, node: str = node, base: list[str] = base) -> str:
                done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=600, check=False)
                if done.returncode != 0:
                    raise HarnessError(
                        f"real node {node}: ctr {' '.join(args)} failed: {done.stderr.strip()[-500:]}",
                        "give a docker-archive or OCI image tar for this host's architecture",
                    )
                return done.stdout

            before = parse_ctr_images(ctr_run("images", "ls"))
            ctr_run("images", "import", str(archive))
            after = parse_ctr_images(ctr_run("images", "ls"))
            loaded[node] = {  # an image's ID alias (sha256:...) the CRI plugin adds is not a name
                ref: digest
                for ref, digest in after.items()
                if before.get(ref) != digest and not ref.startswith("sha256:")
            }
        if driver is not None:
            self._declare_image_driver(name, driver, loaded)
        return loaded

    def _declare_image_driver(self, name: str, driver: str, loaded: dict[str, dict[str, str]]) -> None:
        from kubernetes import client

        from ..declared import Declared, publish, read
        from ..kube import api_client

        images = sorted({(ref, digest) for refs in loaded.values() for ref, digest in refs.items()})
        if len(images) != 1:
            raise HarnessError(
                f"--driver {driver}: the archive holds {len(images)} new image(s) "
                f"({', '.join(r for r, _ in images) or 'none new'}); one image is one driver's build",
                "load a tar of the driver's image alone",
            )
        ((reference, digest),) = images
        core = client.CoreV1Api(api_client(self.kubeconfig(name)))
        current = read(core) or Declared(frozenset(), None, f"kthena-conformance local provider, cluster '{name}'")
        entry = {
            "name": driver,
            "installedBy": "an image loaded into the real nodes (cluster load-image), run by the vendor's manifests",
            "image": reference,
            "digest": digest,
            "nodes": sorted(loaded),
        }
        others = tuple(d for d in current.drivers if d.get("name") != driver)
        publish(core, dataclasses.replace(current, drivers=(*others, entry)))

    def restart_component(self, name: str, component: str, *, timeout: float = 60.0) -> None:
        """Restart one control-plane process (same flags and port) and wait until it is healthy.

        A cluster-level fault: a controller under test must ride through, for example, a
        kube-apiserver restart without a manual step.
        """
        layout = self.layout(name)
        state = self.status(name)
        if not state or not state.get("live"):
            raise HarnessError(f"no running local cluster named '{name}'", "start it with `cluster up`")
        if component not in (state.get("components") or {}):
            known = ", ".join(sorted(state.get("components") or {}))
            raise HarnessError(f"cluster '{name}' has no component {component!r}", f"choose one of: {known}")
        before = int((state.get("restarts") or {}).get(component, 0))
        request = layout.root / "requests" / f"restart-{component}"
        request.parent.mkdir(exist_ok=True)
        request.write_text("")
        os.kill(int(state["supervisor_pid"]), signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if request.exists() and request.read_text().startswith("error"):
                raise HarnessError(request.read_text().strip(), "see the supervisor log")
            current = self._read_state(layout)
            if not request.exists() and int((current.get("restarts") or {}).get(component, 0)) > before:
                return
            time.sleep(0.05)
        raise HarnessError(
            f"{component} of cluster '{name}' did not restart within {timeout:.0f}s", f"see {layout.logs}"
        )

    def fault_injector(self, info: ClusterInfo) -> FaultInjector:
        return kwok_fault_injector(info.kubeconfig, info.context)

    def _declare(self, info: ClusterInfo) -> None:
        """Write what this cluster can do into it (:mod:`..declared`), for runs that reach it later
        through ``--provider existing``."""
        from kubernetes import client

        from ..declared import Declared, RealNodes, publish
        from ..kube import api_client

        dns = info.details.get("dns")
        made_by = f"kthena-conformance local provider, cluster '{info.name}'"
        declared = Declared(
            self.injects,
            dns,
            made_by,
            RealNodes.from_details(info.details),
            tuple(info.details.get("draDrivers") or ()),
        )
        publish(client.CoreV1Api(api_client(info.kubeconfig, info.context)), declared)
