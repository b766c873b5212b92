"""``fake-devices``: run a fake driver's ResourceSlice publisher or kubelet plugin.

    fake-devices publish --driver gpu|npu [--kubeconfig PATH] [--context NAME] [--resync SECONDS]
    fake-devices kubelet-plugin --driver gpu|npu --node-name NODE [--plugin-dir ...] [--cdi-dir ...] [--ready-file F]
    fake-devices device-classes [--driver gpu|npu]     # the DeviceClass manifests, as YAML

Without ``--kubeconfig`` the in-cluster configuration is used inside a Pod, the default kubeconfig
elsewhere. SIGTERM and SIGINT stop either server gracefully (exit code 0).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .drivers import DRIVERS, FAULT_ENV, FAULTS, device_classes, get_driver, parse_faults

log = logging.getLogger("fake_devices")


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
    shape = get_driver(args.driver)
    try:
        faults = parse_faults(os.environ.get(FAULT_ENV))
    except ValueError as exc:
        log.error("%s: %s", FAULT_ENV, exc)
        return 2
    if faults:
        log.warning("SELF-VALIDATION FAULTS ON (a broken variant): %s", ", ".join(sorted(faults)))
    stop = stop_event()
    lookup = api_lookup(api_client(args.kubeconfig, args.context))
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


def cmd_device_classes(args: argparse.Namespace) -> int:
    import yaml

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
    plug.add_argument("--plugin-dir", type=Path, default=server.DEFAULT_PLUGIN_DIR)
    plug.add_argument("--registry-dir", type=Path, default=server.DEFAULT_REGISTRY_DIR)
    plug.add_argument("--cdi-dir", type=Path, default=server.DEFAULT_CDI_DIR)
    plug.add_argument(
        "--ready-file", type=Path, default=None, help="a file kept while the kubelet has the plugin registered"
    )
    plug.set_defaults(func=cmd_kubelet_plugin)

    dc = sub.add_parser("device-classes", help="print the DeviceClass manifests")
    dc.add_argument("--driver", choices=sorted(DRIVERS), default=None)
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
