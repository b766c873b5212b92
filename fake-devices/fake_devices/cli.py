"""``fake-devices``: run a fake driver's ResourceSlice publisher or kubelet plugin.

    fake-devices publish --driver gpu|npu [--kubeconfig PATH] [--context NAME] [--resync SECONDS]
    fake-devices kubelet-plugin --driver gpu|npu --node-name NODE [--plugin-dir ...] [--cdi-dir ...] [--ready-file F]
                                [--driver-name NAME --publish-devices N]   # the fake started as a vendor's driver
    fake-devices device-classes [--driver gpu|npu [--driver-name NAME]]     # the DeviceClass manifests, as YAML

The kubelet plugin reads its node and directories from the variables a DRA driver's DaemonSet
sets (``NODE_NAME``, ``KUBELET_PLUGINS_DIRECTORY_PATH``, ``KUBELET_REGISTRAR_DIRECTORY_PATH``,
``CDI_ROOT``) when the options are left out.

Without ``--kubeconfig`` the in-cluster configuration is used inside a Pod, the default kubeconfig
elsewhere. SIGTERM and SIGINT stop either server gracefully (exit code 0).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .drivers import DRIVERS, FAKE_DOMAIN, FAULT_ENV, FAULTS, DriverShape, device_classes, get_driver, parse_faults

log = logging.getLogger("fake_devices")
DRIVER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def api_client(kubeconfig: str | None, context: str | None) -> Any:
    from kubernetes import client, config

    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return client.ApiClient(configuration)
    return config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]


def stop_event() -> threading.Event:
    """An event set by SIGTERM or SIGINT (only from the main thread)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    return stop


def cmd_publish(args: argparse.Namespace) -> int:
    from .publisher import KubeApi, Publisher

    shape = get_driver(args.driver)
    try:
        faults = parse_faults(",".join(args.fault) if args.fault else os.environ.get(FAULT_ENV))
    except ValueError as exc:
        log.error("--fault / %s: %s", FAULT_ENV, exc)
        return 2
    stop = stop_event()
    api = KubeApi(api_client(args.kubeconfig, args.context), shape)
    publisher = Publisher(shape, api, resync=args.resync, faults=faults)
    if faults:
        log.warning("SELF-VALIDATION FAULTS ON (a broken variant): %s", ", ".join(sorted(faults)))
    log.info("publishing %s devices for nodes labelled %s", shape.driver, shape.count_label)
    publisher.run(stop)
    return 0


def cmd_kubelet_plugin(args: argparse.Namespace) -> int:
    from .kubeletplugin.server import KubeletPlugin, api_lookup

    if not args.node_name:
        log.error("--node-name (or NODE_NAME) is required")
        return 2
    try:
        shape = named_shape(args.driver, args.driver_name)
    except ValueError as exc:
        log.error("--driver-name: %s", exc)
        return 2
    try:
        faults = parse_faults(os.environ.get(FAULT_ENV))
    except ValueError as exc:
        log.error("%s: %s", FAULT_ENV, exc)
        return 2
    if faults:
        log.warning("SELF-VALIDATION FAULTS ON (a broken variant): %s", ", ".join(sorted(faults)))
    stop = stop_event()
    client = api_client(args.kubeconfig, args.context)
    lookup = api_lookup(client)
    publisher = None
    if args.publish_devices:
        from .publisher import NodeApi, Publisher

        publisher = Publisher(shape, NodeApi(client, shape, args.node_name, args.publish_devices), faults=faults)
        log.info("publishing %d %s devices of node %s", args.publish_devices, shape.driver, args.node_name)
        threading.Thread(target=publisher.run, args=(stop,), name="publisher", daemon=True).start()
    plugin = KubeletPlugin(
        shape,
        args.node_name,
        lookup,
        plugin_dir=args.plugin_dir,
        registry_dir=args.registry_dir,
        cdi_dir=args.cdi_dir,
        ready_file=args.ready_file,
        faults=faults,
    )
    with plugin:
        stop.wait()
    return 0


def named_shape(key: str, name: str | None) -> DriverShape:
    """The fake driver ``key`` (gpu, npu), published under ``name`` when given: the fake started the
    way a vendor's driver is, under a name of its own (never the fakes' domain, which the harness
    runs itself); a name that is no DRA driver name is a ValueError."""
    shape = get_driver(key)
    if name is None:
        return shape
    if not DRIVER_NAME.match(name) or len(name) > 63:
        raise ValueError(f"{name!r} is not a DRA driver name (a lowercase DNS subdomain of at most 63 characters)")
    if name.endswith("." + FAKE_DOMAIN):
        raise ValueError(f"{name!r} is under {FAKE_DOMAIN}, the fake drivers' own domain: leave --driver-name out")
    return dataclasses.replace(shape, driver=name)


def cmd_device_classes(args: argparse.Namespace) -> int:
    import yaml

    if args.driver_name:
        if not args.driver:
            log.error("--driver-name needs --driver gpu|npu (the fake whose devices it names)")
            return 2
        try:
            shapes = [named_shape(args.driver, args.driver_name)]
        except ValueError as exc:
            log.error("--driver-name: %s", exc)
            return 2
        sys.stdout.write(yaml.safe_dump_all([s.device_class() for s in shapes], sort_keys=False))
        return 0
    keys = [args.driver] if args.driver else list(DRIVERS)
    try:
        faults = parse_faults(",".join(args.fault) if args.fault else os.environ.get(FAULT_ENV))
    except ValueError as exc:
        log.error("--fault / %s: %s", FAULT_ENV, exc)
        return 2
    if faults:
        log.warning("SELF-VALIDATION FAULTS ON (a broken variant): %s", ", ".join(sorted(faults)))
    sys.stdout.write(yaml.safe_dump_all(device_classes(keys, faults), sort_keys=False))
    return 0


def parser() -> argparse.ArgumentParser:
    from .kubeletplugin import server

    p = argparse.ArgumentParser(prog="fake-devices", description="fake GPU and NPU DRA drivers")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    def kube_options(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--driver", choices=sorted(DRIVERS), required=True)
        sp.add_argument("--kubeconfig", default=None, help="default: in-cluster config in a Pod, else ~/.kube/config")
        sp.add_argument("--context", default=None)

    pub = sub.add_parser("publish", help="keep one ResourceSlice per labelled node in sync")
    kube_options(pub)
    pub.add_argument("--resync", type=float, default=30.0, help="full resync period in seconds (default 30)")
    pub.add_argument(
        "--fault",
        action="append",
        choices=sorted(FAULTS),
        help=f"self-validation only: publish a broken variant (repeatable; default: ${FAULT_ENV})",
    )
    pub.set_defaults(func=cmd_publish)

    plug = sub.add_parser("kubelet-plugin", help="serve the kubelet's Registration and DRAPlugin gRPC services")
    kube_options(plug)
    plug.add_argument("--node-name", default=os.environ.get("NODE_NAME"), help="this node (default: $NODE_NAME)")
    plug.add_argument(
        "--plugin-dir",
        type=Path,
        default=Path(os.environ.get("KUBELET_PLUGINS_DIRECTORY_PATH") or server.DEFAULT_PLUGIN_DIR),
        help="the kubelet's plugins directory (default: $KUBELET_PLUGINS_DIRECTORY_PATH or %(default)s)",
    )
    plug.add_argument(
        "--registry-dir",
        type=Path,
        default=Path(os.environ.get("KUBELET_REGISTRAR_DIRECTORY_PATH") or server.DEFAULT_REGISTRY_DIR),
        help="the kubelet's plugin registration directory (default: $KUBELET_REGISTRAR_DIRECTORY_PATH or %(default)s)",
    )
    plug.add_argument(
        "--cdi-dir",
        type=Path,
        default=Path(os.environ.get("CDI_ROOT") or server.DEFAULT_CDI_DIR),
        help="where CDI specs are written (default: $CDI_ROOT or %(default)s)",
    )
    plug.add_argument(
        "--driver-name",
        default=None,
        help="serve (and publish) the driver's devices under this DRA driver name instead of the fake's own: "
        "the fake started the way a vendor's driver is (never a name under " + FAKE_DOMAIN + ")",
    )
    plug.add_argument(
        "--publish-devices",
        type=int,
        default=0,
        metavar="N",
        help="also publish this node's ResourceSlice with N devices, as a real driver's kubelet plugin does "
        "(default 0: the fake's publisher does it from the node's count label)",
    )
    plug.add_argument(
        "--ready-file", type=Path, default=None, help="a file kept while the kubelet has the plugin registered"
    )
    plug.set_defaults(func=cmd_kubelet_plugin)

    dc = sub.add_parser("device-classes", help="print the DeviceClass manifests")
    dc.add_argument("--driver", choices=sorted(DRIVERS), default=None)
    dc.add_argument("--driver-name", default=None, help="the class of the driver under this name (with --driver)")
    dc.add_argument(
        "--fault",
        action="append",
        choices=sorted(FAULTS),
        help=f"self-validation only: print a broken variant's classes (repeatable; default: ${FAULT_ENV})",
    )
    dc.set_defaults(func=cmd_device_classes)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    code: int = args.func(args)
    return code


def run() -> None:  # console entry point
    sys.exit(main())
