"""The process that owns one embedded cluster, from ``up`` to ``down``.

``python -m conformance.cluster.local.supervisor RUN_DIR [--owner-pid PID]`` reads
``RUN_DIR/spec.json``, generates certificates, picks free ports, starts etcd and kube-apiserver,
creates the spec's CRDs (Established before the garbage collector's first discovery), starts
kube-controller-manager, kube-scheduler and kwok (and CoreDNS, when ``--coredns`` names its binary),
registers the fake Nodes and waits until the API is ready, every component is healthy (CoreDNS: its
kubernetes plugin has synced), every Node is Ready and the ``default`` ServiceAccount exists.

Protocol with whoever started it (see :mod:`conformance.cluster.local.provider`):

- stdout carries JSON lines until the cluster is ready or has failed: ``progress`` events, then
  one ``ready`` (with the state) or ``failed`` (message and hint) event;
- ``RUN_DIR/state.json`` holds the live state for ``status`` and ``down``;
- SIGTERM, SIGINT or SIGHUP stop the cluster; SIGUSR1 stops watching the owner (``cluster up``
  detaches this way once the cluster is ready);
- when ``--owner-pid`` exits (a test run killed with SIGKILL, say), the cluster stops by itself.

Stopping always ends the same way: every component is terminated (killed after a short grace),
and the run directory is removed unless ``KTHENA_KEEP_RUN_DIR=1``. The components die with this
process even if it is SIGKILLed (PR_SET_PDEATHSIG); only the run directory can then be left, and
the next ``up`` sweeps it (the supervisor holds an flock on it while alive).
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..errors import BadInput, HarnessError
from ..pki import CertificateAuthority, service_account_keys
from ..realnode.fleet import Fleet, NodeRequest
from ..realnode.node import REAL_NODE_TAINT
from ..rest import RestClient, probe
from ..spec import ClusterSpec
from . import dra_drivers
from .components import (
    APISERVER_SANS,
    COREDNS_RBAC,
    COREDNS_USER,
    FAKE_DEVICES_USER,
    SERVICE_CIDR,
    Component,
    KubeletPluginSite,
    Ports,
    RunLayout,
    components,
    config_files,
    dns_component,
    dns_files,
    fake_devices_components,
    fake_devices_files,
    fake_devices_objects,
    fake_devices_plugin_components,
    kubelet_plugin_ready_file,
    node_manifests,
)
from .kwok_guard import KWOK_USER, POLICY_NAME, guard_objects
from .processes import free_ports, log_tail, port_in_use, spawn, stop_all

START_TIMEOUT_ENV = "KTHENA_CLUSTER_START_TIMEOUT"


def start_timeout(value: str | None) -> float:
    """Seconds the cluster may take to become ready: ``KTHENA_CLUSTER_START_TIMEOUT``'s (default 90).
    :class:`BadInput` naming the variable when it is not a positive number. Pure."""
    if value is None or not value.strip():
        return 90.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise BadInput(
            f"{START_TIMEOUT_ENV}={value!r}: expected a positive number of seconds", f"unset {START_TIMEOUT_ENV} (90)"
        )
    return seconds


# the provider checks the variable before it starts a supervisor (see LocalProvider.up)
START_TIMEOUT = start_timeout(os.environ.get(START_TIMEOUT_ENV))
POLL = 0.05


class Stop(Exception):
    """Raised inside the start sequence when a stop signal or the owner's exit arrives."""


def free_dns_port(exclude: Collection[int] = ()) -> int:
    """A loopback port that was free for both UDP and TCP a moment ago (DNS listens on both)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            if port in exclude:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise HarnessError("no loopback port is free for both UDP and TCP", "free some ports and try again")


@dataclass
class Supervisor:
    layout: RunLayout
    spec: ClusterSpec
    bin_dir: Path
    owner_pid: int | None
    out: IO[str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    stop_reason: str | None = None
    started_at: float = field(default_factory=time.monotonic)
    timings: dict[str, float] = field(default_factory=dict)
    ports: Ports | None = None
    _owner_fd: int | None = None
    _detach_requested: bool = False
    _restart_requested: bool = False
    plan: dict[str, Component] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    # The fake DRA drivers' kubelet plugins' component names (stopped before the real nodes).
    kubelet_plugins: list[str] = field(default_factory=list)
    # The CoreDNS binary; None runs the cluster without a DNS server.
    coredns: Path | None = None
    # The real nodes (``kind: real`` pools), once started: stopped, and the host restored, in stop().
    fleet: Fleet | None = None
    # The vendors' DRA drivers (spec ``dra_drivers``) as the cluster declares them (dra_drivers.records).
    dra_driver_records: list[dict[str, object]] = field(default_factory=list)

    # -- signalling -----------------------------------------------------------------------------

    def install_signals(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_stop)
        signal.signal(signal.SIGUSR1, self._on_detach)
        signal.signal(signal.SIGUSR2, self._on_restart_request)
        if self.owner_pid is not None:
            try:
                self._owner_fd = os.pidfd_open(self.owner_pid)
            except ProcessLookupError:
                self.stop_reason = f"owner process {self.owner_pid} is already gone"

    def _on_stop(self, signum: int, _frame: object) -> None:
        self.stop_reason = f"received {signal.Signals(signum).name}"

    def _on_detach(self, _signum: int, _frame: object) -> None:
        # Only a flag: the owner's pidfd may be inside a select() that PEP 475 restarts with the
        # same descriptor after this handler returns, so it is closed by the loop, not here.
        self._detach_requested = True

    def _on_restart_request(self, _signum: int, _frame: object) -> None:
        self._restart_requested = True

    def _restart_requested_components(self) -> None:
        """Restart every component named by a ``requests/restart-<name>`` file (fault injection:
        the harness restarts kube-apiserver under a controller, say). Same flags, same port."""
        self._restart_requested = False
        requests = self.layout.root / "requests"
        for request in sorted(requests.glob("restart-*")) if requests.is_dir() else []:
            name = request.name.removeprefix("restart-")
            comp = self.plan.get(name)
            if comp is None or name not in self.procs:
                request.write_text(f"error: no running component named {name!r}\n")
                continue
            stop_all([self.procs[name]])
            self.launch(comp)
            deadline = time.monotonic() + START_TIMEOUT
            while comp.health_url and not probe(comp.health_url, timeout=0.5) and time.monotonic() < deadline:
                if self.procs[name].poll() is not None:
                    break
                time.sleep(POLL)
            self.restarts[name] = self.restarts.get(name, 0) + 1
            self.write_state("ready")
            request.unlink()
            print(f"supervisor: restarted {name}", file=sys.stderr, flush=True)

    def _detach(self) -> None:
        self._detach_requested = False
        if self._owner_fd is not None:
            os.close(self._owner_fd)
            self._owner_fd = None
        self.owner_pid = None
        self.write_state("ready")
        self.emit("detached")

    def check_stop(self) -> None:
        if self._owner_fd is not None:
            readable, _, _ = select.select([self._owner_fd], [], [], 0)
            if readable:
                self.stop_reason = f"owner process {self.owner_pid} exited"
        if self.stop_reason:
            raise Stop(self.stop_reason)

    # -- reporting ------------------------------------------------------------------------------

    def emit(self, event: str, **fields: object) -> None:
        line = json.dumps({"event": event, "t": round(time.monotonic() - self.started_at, 3), **fields})
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (BrokenPipeError, ValueError):
            self.out = open(os.devnull, "w")  # noqa: SIM115 - the reader went away; keep running

    def write_state(self, phase: str, **extra: object) -> None:
        state = {
            "phase": phase,
            "supervisor_pid": os.getpid(),
            "owner_pid": self.owner_pid,
            "name": self.spec.name,
            "run_dir": str(self.layout.root),
            "kubeconfig": str(self.layout.kubeconfig),
            "bin_dir": str(self.bin_dir),
            "components": {name: p.pid for name, p in self.procs.items()},
            "timings": self.timings,
            "ports": self.ports.as_dict() if self.ports else {},
            "restarts": self.restarts,
            "real_nodes": [node.name for node in self.fleet.nodes] if self.fleet else [],
            # where a DRA kubelet plugin on each real node serves, registers and writes CDI specs
            "real_node_dirs": {d.node: d.as_dict() for d in self.real_node_plugin_dirs().values()},
            **({"dra_drivers": self.dra_driver_records} if self.dra_driver_records else {}),
            **({"dns": f"127.0.0.1:{self.ports.dns}"} if self.ports and self.ports.dns else {}),
            **extra,
        }
        tmp = self.layout.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.layout.state)

    # -- start ----------------------------------------------------------------------------------

    def start(self) -> Ports:
        self.emit("progress", message="generating certificates and configuration")
        ports = self.ports = self.pick_ports()
        self.prepare_files(ports)
        plan = self.plan = {c.name: c for c in components(self.layout, self.bin_dir, ports)}
        if self.coredns is not None:
            plan["coredns"] = dns_component(self.layout, self.coredns, ports)
        self.emit("progress", message=f"starting etcd and kube-apiserver on 127.0.0.1:{ports.apiserver}")
        for name in ("etcd", "kube-apiserver"):
            self.launch(plan[name])
        self.wait_healthy([plan["etcd"], plan["kube-apiserver"]])
        self.timings["apiserver_ready"] = self.elapsed()
        api = RestClient(
            f"https://127.0.0.1:{ports.apiserver}",
            ca=self.layout.pki / "ca.crt",
            cert=self.layout.pki / "admin.crt",
            key=self.layout.pki / "admin.key",
        )
        if self.spec.crds:
            self.install_crds(api)
            self.timings["crds_established"] = self.elapsed()
        self.guard_kwok(api)
        rest = [plan["kube-controller-manager"], plan["kube-scheduler"], plan["kwok"]]
        pod_facing_dns = self.prepare_real_nodes(ports) if self.spec.real_pools() else []
        if "coredns" in plan:
            if pod_facing_dns:  # real nodes' Pods ask on their bridges: CoreDNS listens there too
                for path, text in dns_files(self.layout, ports, pod_facing_dns).items():
                    path.write_text(text)
            self.grant_coredns(api)
            rest.append(plan["coredns"])
        self.emit("progress", message="starting " + ", ".join(c.name for c in rest))
        for comp in rest:
            self.launch(comp)
        names = self.spec.node_names()
        self.emit("progress", message=f"registering {len(names)} fake node(s)")
        for manifest in node_manifests(self.spec):
            resp = api.post("/api/v1/nodes", json.loads(manifest))
            if resp.status not in (201, 409):
                raise HarnessError(f"creating a Node failed: HTTP {resp.status} {resp.body[:300]!r}")
        self.wait_healthy(rest)
        self.timings["components_healthy"] = self.elapsed()
        if self.fleet is not None:
            self.start_real_nodes()
        devices = self.spec.device_nodes()
        sites = self.kubelet_plugin_sites(devices)
        if devices:
            self.start_fake_devices(api, list(devices), sites)
        self.wait_for(
            "all nodes Ready and the default ServiceAccount",
            lambda: self.nodes_ready(api, names) and self.sa_ready(api),
        )
        if sites:
            self.wait_for(
                lambda: (
                    "the real nodes' kubelets to register the fake DRA kubelet plugins: "
                    + ", ".join(f"{s.driver} on {s.node}" for s in sites if not self.plugin_registered(s))
                ),
                lambda: all(self.plugin_registered(s) for s in sites),
            )
            self.timings["kubelet_plugins_registered"] = self.elapsed()
        if self.spec.dra_drivers:
            self.start_dra_drivers(api)
        if devices:
            self.wait_for(
                "the fake DRA drivers' ResourceSlices on every device node",
                lambda: self.slices_published(api, devices),
            )
            self.timings["devices_published"] = self.elapsed()
        self.timings["ready"] = self.elapsed()
        return ports

    def install_crds(self, api: RestClient) -> None:
        """The spec's CRDs, Established before kube-controller-manager starts (see
        :attr:`ClusterSpec.crds`: its garbage collector then tracks them from the first sync)."""
        names = [crd["metadata"]["name"] for crd in self.spec.crds]
        self.emit("progress", message="installing CRDs before kube-controller-manager: " + ", ".join(names))
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        for crd in self.spec.crds:
            resp = api.post(path, crd)
            if resp.status not in (201, 409):
                raise HarnessError(
                    f"creating CRD {crd['metadata']['name']} failed: HTTP {resp.status} {resp.body[:300]!r}",
                    "check the CRD manifest (cluster spec `crds`)",
                )

        def established(name: str) -> bool:
            resp = api.get(f"{path}/{name}")
            if resp.status != 200:
                return False
            data = resp.json()
            assert isinstance(data, dict)
            conditions = (data.get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

        self.wait_for("CRDs Established: " + ", ".join(names), lambda: all(established(n) for n in names))

    def prepare_real_nodes(self, ports: Ports) -> list[str]:
        """Host checks, lock, snapshot and bridges of the real nodes (:mod:`..realnode.fleet`);
        returns the bridge addresses, where CoreDNS must answer their Pods."""
        requests = [
            # the real-node taint first: only Pods placed there on purpose (tolerating it) run for real
            NodeRequest(name, pool.labels, [REAL_NODE_TAINT, *(t.model_dump() for t in pool.taints)])
            for pool in self.spec.real_pools()
            for name in pool.node_names()
        ]
        self.emit(
            "progress", message="checking the host and preparing real nodes: " + ", ".join(r.name for r in requests)
        )
        self.fleet = Fleet(self.layout.root, self.bin_dir, self.layout.logs)
        service_ip = str(ipaddress.ip_network(SERVICE_CIDR)[1])  # default/kubernetes: Pods' in-cluster config
        return self.fleet.prepare(requests, server=f"https://127.0.0.1:{ports.apiserver}", service_ip=service_ip)

    def start_real_nodes(self) -> None:
        """containerd and a kubelet per real node; their Nodes register themselves and join the Ready
        wait with the kwok ones."""
        assert self.fleet is not None
        self.fleet.start(
            ca=CertificateAuthority.load(self.layout.pki),
            progress=lambda message: self.emit("progress", message=message),
        )
        self.procs.update(self.fleet.processes())
        self.timings["real_nodes_started"] = self.elapsed()
        self.write_state("starting")

    def kubelet_plugin_sites(self, devices: dict[str, list[str]]) -> list[KubeletPluginSite]:
        """The fake drivers' kubelet plugins to run: one per driver on each real device node
        (kwok nodes run no kubelet: there the scheduler allocates and nothing prepares)."""
        real = {node.name: node for node in self.fleet.nodes} if self.fleet else {}
        return [
            KubeletPluginSite(
                driver=key,
                node=name,
                plugin_dir=real[name].dirs.dra_plugins,
                registry_dir=real[name].dirs.plugin_registry,
                cdi_dir=real[name].dirs.cdi,
            )
            for key, nodes in devices.items()
            for name in nodes
            if name in real
        ]

    def real_node_plugin_dirs(self) -> dict[str, dra_drivers.NodePluginDirs]:
        """Each real node's kubelet plugin, registration and CDI directories."""
        nodes = self.fleet.nodes if self.fleet else []
        return {
            n.name: dra_drivers.NodePluginDirs(n.name, n.dirs.dra_plugins, n.dirs.plugin_registry, n.dirs.cdi)
            for n in nodes
        }

    def start_dra_drivers(self, api: RestClient) -> None:
        """The vendors' DRA drivers (spec ``dra_drivers``): their manifests created, then their
        command once per real node, waited for until every node's kubelet has it registered."""
        programs = {name: str(path) for name, path in dra_drivers.check_drivers(self.spec).items()}
        for driver in self.spec.dra_drivers:
            objects = dra_drivers.load_manifests(driver)
            if objects:
                self.emit("progress", message=f"creating {len(objects)} object(s) of DRA driver {driver.name}")
                self.create_objects(objects)
        dirs = self.real_node_plugin_dirs()
        comps = dra_drivers.driver_components(self.spec, dirs, self.layout.kubeconfig, programs)
        self.emit(
            "progress",
            message="starting the DRA drivers on the real nodes: "
            + ", ".join(f"{d.name} ({' '.join(d.command)})" for d in self.spec.dra_drivers),
        )
        for comp in comps:
            self.plan[comp.name] = comp
            self.launch(comp)
        self.kubelet_plugins += [c.name for c in comps]
        self.dra_driver_records = dra_drivers.records(self.spec, {k: Path(v) for k, v in programs.items()})
        self.write_state("starting")
        sites = [(d.name, dirs[n]) for d in self.spec.dra_drivers for n in self.spec.driver_nodes(d)]
        waiting: list[str] = []

        def registered() -> bool:
            metrics = {}
            for node in {site.node for _, site in sites}:
                resp = api.get(f"/api/v1/nodes/{node}/proxy/metrics")
                metrics[node] = resp.body.decode(errors="replace") if resp.status == 200 else ""
            waiting[:] = dra_drivers.pending(sites, metrics)
            return not waiting

        self.wait_for(lambda: "the real nodes' kubelets to register the DRA drivers: " + ", ".join(waiting), registered)
        self.timings["dra_drivers_registered"] = self.elapsed()

    def create_objects(self, objects: list[tuple[str, dict[str, object]]]) -> None:
        """Create each object with the admin identity; one that exists is kept as it is."""
        from kubernetes import utils
        from kubernetes.client.exceptions import ApiException

        from ..kube import api_client

        client = api_client(self.layout.kubeconfig, None)
        for where, doc in objects:
            try:
                utils.create_from_dict(client, doc)  # type: ignore[no-untyped-call]
            except utils.FailToCreateError as exc:
                failures = [e for e in exc.api_exceptions if not (isinstance(e, ApiException) and e.status == 409)]
                if failures:
                    raise HarnessError(f"{where}: refused: {failures[0]}", "fix the manifest") from None
            except (ValueError, AttributeError, KeyError) as exc:
                raise HarnessError(f"{where}: cannot be created: {exc}", "give a complete Kubernetes object") from None

    def plugin_registered(self, site: KubeletPluginSite) -> bool:
        return kubelet_plugin_ready_file(self.layout, site.driver, site.node).exists()

    def start_fake_devices(self, api: RestClient, drivers: list[str], sites: list[KubeletPluginSite]) -> None:
        """RBAC and DeviceClasses for the fake DRA drivers, then one publisher per driver and one
        kubelet plugin per driver on each real device node."""
        on_real = f" (kubelet plugins on {', '.join(sorted({s.node for s in sites}))})" if sites else ""
        self.emit("progress", message="starting the fake DRA drivers: " + ", ".join(drivers) + on_real)
        for path, body in fake_devices_objects(drivers, kubelet_plugins=bool(sites)):
            resp = api.post(path, body)
            if resp.status not in (201, 409):
                raise HarnessError(f"creating {body['kind']} {body['metadata']['name']} failed: HTTP {resp.status}")
        comps = fake_devices_components(self.layout, drivers) + fake_devices_plugin_components(self.layout, sites)
        for comp in comps:
            self.plan[comp.name] = comp
            self.launch(comp)
        self.kubelet_plugins = [c.name for c in comps[len(drivers) :]]

    @staticmethod
    def slices_published(api: RestClient, devices: dict[str, list[str]]) -> bool:
        """True once every device node has its slice from each of its drivers."""
        from fake_devices.drivers import get_driver

        resp = api.get("/apis/resource.k8s.io/v1/resourceslices")
        if resp.status != 200:
            return False
        data = resp.json()
        assert isinstance(data, dict)
        have = {(s["spec"].get("driver"), s["spec"].get("nodeName")) for s in data.get("items") or []}
        want = {(get_driver(key).driver, node) for key, nodes in devices.items() for node in nodes}
        return want <= have

    @staticmethod
    def guard_kwok(api: RestClient) -> None:
        """kwok's stale stages refused before it starts (:mod:`.kwok_guard`)."""
        for path, body in guard_objects():
            resp = api.post(path, body)
            if resp.status not in (201, 409):
                raise HarnessError(
                    f"creating {body['kind']} {POLICY_NAME} failed: HTTP {resp.status} {resp.body[:300]!r}"
                )

    @staticmethod
    def grant_coredns(api: RestClient) -> None:
        """Read access for CoreDNS's user, before it starts (no retry backoff on Forbidden)."""
        for path, body in COREDNS_RBAC:
            resp = api.post(path, body)
            if resp.status not in (201, 409):
                raise HarnessError(f"granting CoreDNS read access failed: HTTP {resp.status} {resp.body[:300]!r}")

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started_at, 3)

    def pick_ports(self) -> Ports:
        fixed = self.spec.apiserver_port
        if fixed is not None and port_in_use(fixed):
            raise HarnessError(
                f"port {fixed} (apiserver_port) is already in use on 127.0.0.1",
                "stop whatever listens there, choose another --apiserver-port, or omit it to pick a free port",
            )
        picked = free_ports(7 if self.coredns else 6)
        return Ports(
            etcd_client=picked[0],
            etcd_peer=picked[1],
            apiserver=fixed or picked[2],
            controller_manager=picked[3],
            scheduler=picked[4],
            kwok=picked[5],
            dns=free_dns_port(exclude={*picked, fixed or 0}) if self.coredns else None,
            dns_ready=picked[6] if self.coredns else None,
        )

    def prepare_files(self, ports: Ports) -> None:
        ca = CertificateAuthority(self.layout.pki)
        ca.issue("apiserver", common_name="kube-apiserver", hosts=APISERVER_SANS, server=True)
        ca.issue("admin", common_name="kthena-admin", organization="system:masters", client=True)
        # The API server's identity toward kubelets (as kubeadm's apiserver-kubelet-client).
        ca.issue(
            "apiserver-kubelet-client",
            common_name="kube-apiserver-kubelet-client",
            organization="system:masters",
            client=True,
        )
        ca.issue("kube-controller-manager", common_name="system:kube-controller-manager", client=True)
        ca.issue("kube-scheduler", common_name="system:kube-scheduler", client=True)
        # kwok plays every node's kubelet (status, leases, pod status): it gets cluster-admin.
        ca.issue("kwok", common_name=KWOK_USER, organization="system:masters", client=True)
        service_account_keys(self.layout.pki)
        files = config_files(self.layout, self.spec, ports)
        if self.spec.device_nodes():
            ca.issue("fake-devices", common_name=FAKE_DEVICES_USER, client=True)
            files.update(fake_devices_files(self.layout, ports))
        if self.coredns is not None:
            ca.issue("coredns", common_name=COREDNS_USER, client=True)
            files.update(dns_files(self.layout, ports))
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.layout.etcd_data.mkdir(mode=0o700, exist_ok=True)
        self.write_state("starting")

    def launch(self, comp: Component) -> None:
        env = {**os.environ, **dict(comp.env)} if comp.env else None
        self.procs[comp.name] = spawn(comp.argv, self.layout.log(comp.name), env=env)

    def check_components(self) -> None:
        for name, proc in self.procs.items():
            code = proc.poll()
            if code is not None:
                raise self.crashed(name, code)

    def crashed(self, name: str, code: int) -> HarnessError:
        tail = log_tail(self.layout.log(name))
        text = "\n".join(tail)
        if "address already in use" in text:
            hint = "another process took one of the picked ports; run `cluster up` again"
        else:
            hint = f"see {self.layout.log(name)} (run with KTHENA_KEEP_RUN_DIR=1 to keep it)"
        shown = "\n      ".join(tail[-8:]) or "(no output)"
        return HarnessError(f"{name} exited with code {code} during start; its last output:\n      {shown}", hint)

    def wait_healthy(self, comps: list[Component]) -> None:
        pending = [c for c in comps if c.health_url]

        def check() -> bool:
            nonlocal pending
            pending = [c for c in pending if not probe(c.health_url or "", timeout=0.5)]
            return not pending

        self.wait_for(lambda: "healthy " + ", ".join(c.name for c in pending), check)

    def wait_for(self, what: str | Callable[[], str], check: Callable[[], bool]) -> None:
        deadline = self.started_at + START_TIMEOUT
        while True:
            self.check_stop()
            self.check_components()
            if check():
                return
            if time.monotonic() > deadline:
                label = what() if callable(what) else what
                raise HarnessError(
                    f"the cluster did not become ready within {START_TIMEOUT:.0f}s (waiting for {label})",
                    f"see the component logs in {self.layout.logs}; "
                    "raise KTHENA_CLUSTER_START_TIMEOUT on a slow machine",
                )
            time.sleep(POLL)

    @staticmethod
    def nodes_ready(api: RestClient, names: list[str]) -> bool:
        resp = api.get("/api/v1/nodes")
        if resp.status != 200:
            return False
        data = resp.json()
        assert isinstance(data, dict)
        ready = set()
        for node in data.get("items", []):
            for cond in node.get("status", {}).get("conditions", []) or []:
                if cond.get("type") == "Ready" and cond.get("status") == "True":
                    ready.add(node["metadata"]["name"])
        return set(names) <= ready

    @staticmethod
    def sa_ready(api: RestClient) -> bool:
        return api.get("/api/v1/namespaces/default/serviceaccounts/default").status == 200

    # -- run and stop ---------------------------------------------------------------------------

    def serve(self) -> None:
        """Watch the components and the owner until told to stop."""
        while True:
            if self._detach_requested:
                self._detach()
            if self._restart_requested:
                self._restart_requested_components()
            try:
                self.check_stop()
            except Stop:
                return
            for name, proc in self.procs.items():
                code = proc.poll()
                if code is not None:
                    # Keep serving (the rest may still be useful for evidence), but say so.
                    self.write_state(
                        "degraded", failed_component=name, exit_code=code, log_tail=log_tail(self.layout.log(name))
                    )
                    print(f"supervisor: {name} exited with code {code}", file=sys.stderr, flush=True)
                    self.procs = {n: p for n, p in self.procs.items() if n != name}
                    break
            if self._owner_fd is not None:
                select.select([self._owner_fd], [], [], 0.2)
            else:
                time.sleep(0.2)

    def stop(self) -> None:
        # The kubelet plugins before their kubelets: a registered plugin's sockets live in the node's
        # directory, which the fleet's restore removes.
        stop_all([self.procs.pop(name) for name in self.kubelet_plugins if name in self.procs])
        if self.fleet is not None:  # first: its restore must not find the control plane's state half gone
            for name in self.fleet.processes():
                self.procs.pop(name, None)
            for line in self.fleet.stop():
                print(f"supervisor: real nodes: {line}", file=sys.stderr, flush=True)
        stop_all(reversed(list(self.procs.values())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kthena-cluster-supervisor")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--owner-pid", type=int, default=None)
    parser.add_argument("--bin-dir", type=Path, required=True)
    parser.add_argument("--coredns", type=Path, default=None, help="CoreDNS binary: run a DNS server for the cluster")
    args = parser.parse_args(argv)

    layout = RunLayout(args.run_dir)
    out = sys.stdout
    # From here on, stray prints must not corrupt the event stream.
    sys.stdout = sys.stderr
    lock = layout.lock.open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        out.write(json.dumps({"event": "failed", "message": f"{layout.root} is owned by another supervisor"}) + "\n")
        return 2
    spec = ClusterSpec.model_validate_json(layout.spec.read_text())
    sup = Supervisor(layout, spec, args.bin_dir, args.owner_pid, out, coredns=args.coredns)
    sup.install_signals()
    code = 0
    try:
        ports = sup.start()
        sup.write_state("ready")
        sup.emit("ready", kubeconfig=str(layout.kubeconfig), timings=sup.timings, ports=ports.as_dict())
        sup.serve()
    except Stop as exc:
        sup.emit("failed", message=f"start interrupted: {exc}", hint="")
        code = 130
    except HarnessError as exc:
        print(f"supervisor: start failed: {exc}", file=sys.stderr, flush=True)
        sup.emit("failed", message=exc.message, hint=exc.hint)
        code = 1
    except Exception as exc:  # report, then clean up like any other failure
        traceback.print_exc()
        sup.emit(
            "failed",
            message=f"supervisor error: {type(exc).__name__}: {exc}",
            hint="this is a bug; please report it with the run directory",
        )
        code = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sup.stop()
        if os.environ.get("KTHENA_KEEP_RUN_DIR") != "1":
            shutil.rmtree(layout.root, ignore_errors=True)
        else:
            sup.write_state("stopped")
        lock.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
