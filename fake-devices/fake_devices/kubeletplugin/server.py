"""The DRA kubelet plugin: the two gRPC services a kubelet talks to, over unix sockets.

- **Registration** (``pluginregistration.Registration``, on
  ``<registry-dir>/<driver>-reg.sock``, the directory the kubelet's plugin watcher scans):
  ``GetInfo`` says "a DRAPlugin named ``<driver>``, serving ``v1.DRAPlugin`` at
  ``<plugin-dir>/<driver>/dra.sock``"; ``NotifyRegistrationStatus`` is the kubelet's answer.
- **DRAPlugin v1** (``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``, on that endpoint):
  ``NodePrepareResources`` reads each ResourceClaim from the API (``lookup``), takes the
  allocation results of this driver on this node (pool = node name), writes the claim's CDI spec
  (:mod:`.cdi`) and returns the CDI device ids; ``NodeUnprepareResources`` removes the spec. Both
  are idempotent, and a problem with one claim is reported in that claim's ``error`` (the kubelet
  retries it) rather than failing the call.

The handlers are registered with ``grpc.method_handlers_generic_handler`` on the generated
message classes, so the service and method names come from the vendored protos' descriptors.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from ..drivers import DriverShape
from . import cdi
from .pb import dra_v1_pb2 as dra
from .pb import pluginregistration_v1_pb2 as reg

log = logging.getLogger("fake_devices.kubeletplugin")

DRA_PLUGIN_TYPE = "DRAPlugin"  # k8s.io/kubelet/pkg/apis/pluginregistration/v1 DRAPlugin
DRA_SERVICE_VERSION = "v1.DRAPlugin"  # k8s.io/kubelet/pkg/apis/dra/v1 DRAPluginService
DEFAULT_PLUGIN_DIR = Path("/var/lib/kubelet/plugins")
DEFAULT_REGISTRY_DIR = Path("/var/lib/kubelet/plugins_registry")
DEFAULT_CDI_DIR = Path("/var/run/cdi")

# (namespace, name) -> the ResourceClaim as JSON, or None when it does not exist.
ClaimLookup = Callable[[str, str], "dict[str, Any] | None"]


def api_lookup(api_client: Any, *, timeout: float = 10.0) -> ClaimLookup:
    """A :data:`ClaimLookup` reading ResourceClaims through the official client."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from ..publisher import ApiError, checked

    resource: Any = client.ResourceV1Api(api_client)

    def lookup(namespace: str, name: str) -> dict[str, Any] | None:
        try:
            resp = resource.read_namespaced_resource_claim(
                name, namespace, _preload_content=False, _request_timeout=timeout
            )
            return checked(resp)
        except (ApiException, ApiError) as exc:
            if exc.status == 404:
                return None
            raise

    return lookup


def _full_name(service: str, module: Any) -> str:
    return str(module.DESCRIPTOR.services_by_name[service].full_name)


@dataclass
class DraService:
    """NodePrepareResources / NodeUnprepareResources for one driver on one node."""

    shape: DriverShape
    node_name: str
    cdi_dir: Path
    lookup: ClaimLookup
    faults: frozenset[str] = frozenset()  # self-validation only (drivers.FAULTS)
    prepared: dict[str, list[cdi.PreparedDevice]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allocated(self, claim: dict[str, Any]) -> list[dict[str, Any]]:
        """This driver's allocation results on this node."""
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        return [r for r in results if r.get("driver") == self.shape.driver and r.get("pool") == self.node_name]

    def prepare_claim(self, namespace: str, name: str, uid: str) -> list[cdi.PreparedDevice]:
        """Write the claim's CDI spec and return its devices; raises ValueError with the reason."""
        obj = self.lookup(namespace, name)
        if obj is None:
            raise ValueError(f"ResourceClaim {namespace}/{name} not found")
        actual = (obj.get("metadata") or {}).get("uid")
        if actual != uid:
            raise ValueError(f"ResourceClaim {namespace}/{name} has uid {actual}, the kubelet asked for {uid}")
        results = self.allocated(obj)
        if not results:
            raise ValueError(
                f"ResourceClaim {namespace}/{name} has no device of driver {self.shape.driver} "
                f"allocated on node {self.node_name}"
            )
        names = [str(r["device"]) for r in results]
        cdi.write_spec(self.cdi_dir, self.shape, uid, names, next_device_env="cdi-env-next-device" in self.faults)
        devices = [
            cdi.PreparedDevice(
                request_names=(str(r.get("request", "")),) if r.get("request") else (),
                pool=str(r["pool"]),
                device=str(r["device"]),
                cdi_ids=(cdi.cdi_id(self.shape, uid, str(r["device"])),),
            )
            for r in results
        ]
        with self._lock:
            self.prepared[uid] = devices
        return devices

    def node_prepare_resources(self, request: Any, _context: grpc.ServicerContext) -> Any:
        response = dra.NodePrepareResourcesResponse()
        for claim in request.claims:
            entry = response.claims[claim.uid]
            try:
                devices = self.prepare_claim(claim.namespace, claim.name, claim.uid)
            except Exception as exc:  # one claim's problem, reported for that claim
                log.warning("prepare %s/%s (%s): %s", claim.namespace, claim.name, claim.uid, exc)
                entry.error = str(exc) or type(exc).__name__
                continue
            for d in devices:
                entry.devices.add(
                    request_names=list(d.request_names),
                    pool_name=d.pool,
                    device_name=d.device,
                    cdi_device_ids=list(d.cdi_ids),
                )
            log.info("prepared %s/%s: %s", claim.namespace, claim.name, ", ".join(d.device for d in devices))
        return response

    def node_unprepare_resources(self, request: Any, _context: grpc.ServicerContext) -> Any:
        response = dra.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            entry = response.claims[claim.uid]
            try:
                cdi.remove_spec(self.cdi_dir, self.shape, claim.uid)
            except OSError as exc:
                entry.error = f"removing the CDI spec of claim {claim.uid}: {exc}"
                continue
            with self._lock:
                self.prepared.pop(claim.uid, None)
            log.info("unprepared %s/%s", claim.namespace, claim.name)
        return response

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            _full_name("DRAPlugin", dra),
            {
                "NodePrepareResources": grpc.unary_unary_rpc_method_handler(
                    self.node_prepare_resources,
                    request_deserializer=dra.NodePrepareResourcesRequest.FromString,
                    response_serializer=dra.NodePrepareResourcesResponse.SerializeToString,
                ),
                "NodeUnprepareResources": grpc.unary_unary_rpc_method_handler(
                    self.node_unprepare_resources,
                    request_deserializer=dra.NodeUnprepareResourcesRequest.FromString,
                    response_serializer=dra.NodeUnprepareResourcesResponse.SerializeToString,
                ),
            },
        )


MAX_SOCKET_PATH = 105
"""The longest unix socket path gRPC binds (measured with grpcio 1.x: 105 bytes bind, 106 are refused;
the kernel's own limit is 107)."""


def registration_socket(registry_dir: Path, driver: str) -> Path:
    """The registration socket: ``<driver>-reg.sock`` as the upstream kubeletplugin helper names it
    (what a vendor route recognises a driver by), or, where that path is too long for gRPC (a long
    driver name in a deep node directory), ``<first label>-<8 hex of the name>-reg.sock``: the
    kubelet's plugin watcher takes any socket in the directory and asks it for the name. Pure."""
    named = registry_dir / f"{driver}-reg.sock"
    if len(str(named).encode()) <= MAX_SOCKET_PATH:
        return named
    digest = hashlib.sha256(driver.encode()).hexdigest()[:8]
    return registry_dir / f"{driver.split('.', 1)[0]}-{digest}-reg.sock"


@dataclass
class RegistrationService:
    """What the kubelet's plugin watcher asks on the registration socket."""

    shape: DriverShape
    endpoint: Path
    ready_file: Path | None = None  # present exactly while the kubelet has the plugin registered
    registered: threading.Event = field(default_factory=threading.Event)
    last_error: str = ""

    def get_info(self, _request: Any, _context: grpc.ServicerContext) -> Any:
        return reg.PluginInfo(
            type=DRA_PLUGIN_TYPE,
            name=self.shape.driver,
            endpoint=str(self.endpoint),
            supported_versions=[DRA_SERVICE_VERSION],
        )

    def notify_registration_status(self, request: Any, _context: grpc.ServicerContext) -> Any:
        if request.plugin_registered:
            log.info("registered with the kubelet as %s", self.shape.driver)
            self.last_error = ""
            self.registered.set()
            if self.ready_file is not None:
                self.ready_file.parent.mkdir(parents=True, exist_ok=True)
                self.ready_file.write_text(f"{self.shape.driver} registered\n")
        else:
            log.error("the kubelet refused the registration: %s", request.error)
            self.last_error = str(request.error)
            self.registered.clear()
            if self.ready_file is not None:
                self.ready_file.unlink(missing_ok=True)
        return reg.RegistrationStatusResponse()

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            _full_name("Registration", reg),
            {
                "GetInfo": grpc.unary_unary_rpc_method_handler(
                    self.get_info,
                    request_deserializer=reg.InfoRequest.FromString,
                    response_serializer=reg.PluginInfo.SerializeToString,
                ),
                "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                    self.notify_registration_status,
                    request_deserializer=reg.RegistrationStatus.FromString,
                    response_serializer=reg.RegistrationStatusResponse.SerializeToString,
                ),
            },
        )


class KubeletPlugin:
    """Both servers, started and stopped together; a context manager.

    The DRA socket is ``<plugin_dir>/<driver>/dra.sock`` and the registration socket
    ``<registry_dir>/<driver>-reg.sock``. Stale sockets from a previous run are replaced; both are
    removed on :meth:`stop`. (A unix socket path is limited to 107 bytes.) ``ready_file``, when
    given, exists exactly while the kubelet has the plugin registered (what a supervisor waits for).
    """

    def __init__(
        self,
        shape: DriverShape,
        node_name: str,
        lookup: ClaimLookup,
        *,
        plugin_dir: Path = DEFAULT_PLUGIN_DIR,
        registry_dir: Path = DEFAULT_REGISTRY_DIR,
        cdi_dir: Path = DEFAULT_CDI_DIR,
        ready_file: Path | None = None,
        faults: frozenset[str] = frozenset(),
    ) -> None:
        self.shape = shape
        self.dra_socket = plugin_dir / shape.driver / "dra.sock"
        self.registration_socket = registration_socket(registry_dir, shape.driver)
        for path in (self.dra_socket, self.registration_socket):
            if len(str(path).encode()) > MAX_SOCKET_PATH:
                raise ValueError(
                    f"unix socket path too long ({len(str(path))} bytes, gRPC takes {MAX_SOCKET_PATH}): {path}"
                )
        self.dra = DraService(shape, node_name, cdi_dir, lookup, faults)
        self.registration = RegistrationService(shape, self.dra_socket, ready_file)
        self._servers: list[grpc.Server] = []

    def start(self) -> None:
        # The DRA endpoint first: the kubelet may call it as soon as registration succeeds.
        for path, handler in (
            (self.dra_socket, self.dra.handler()),
            (self.registration_socket, self.registration.handler()),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"grpc-{path.stem}"))
            server.add_generic_rpc_handlers((handler,))
            if server.add_insecure_port(f"unix://{path}") == 0:
                raise OSError(f"cannot listen on {path}")
            server.start()
            self._servers.append(server)
            log.info("serving %s", path)

    def stop(self, grace: float = 1.0) -> None:
        # Registration first, so the kubelet stops routing to a plugin that is going away.
        for server in reversed(self._servers):
            server.stop(grace).wait()
        self._servers.clear()
        for path in (self.registration_socket, self.dra_socket):
            path.unlink(missing_ok=True)
        if self.registration.ready_file is not None:
            self.registration.ready_file.unlink(missing_ok=True)

    def __enter__(self) -> KubeletPlugin:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
