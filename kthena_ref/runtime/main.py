"""Process entry for ``kthena-ref run``: configuration, leader election, signals, shutdown.

On SIGTERM or SIGINT the controller stops taking work, finishes the reconciles in flight and
closes its connections; with leader election it acts only while it holds the Lease
``kthena-ref-controller`` (kubernetes_asyncio's LeaseLock), and stops acting if it loses it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from pathlib import Path

from kubernetes_asyncio import client, config

from . import scope
from .controller import Controller, ControllerConfig

log = logging.getLogger(__name__)
LEASE_NAME = "kthena-ref-controller"


async def _api(kubeconfig: Path | None) -> client.ApiClient:
    if kubeconfig is not None:
        return await config.new_client_from_config(config_file=str(kubeconfig))
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


async def run_controller(
    kubeconfig: Path | None,
    namespace: str | None,
    workers: int,
    leader_elect: bool,
    lease_namespace: str,
    owner_pid: int | None = None,
    webhook: tuple[str, int, Path | None, Path | None] | None = None,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if owner_pid is not None:  # a test run that started us: stop when it is gone
        try:
            loop.add_reader(os.pidfd_open(owner_pid), stop.set)
        except ProcessLookupError:
            return
    runner = None
    api = await _api(kubeconfig)
    scope.use(api)  # scoped faults (self-validation) read namespace labels through it
    try:
        if webhook is not None:  # admission does not need the Lease: every replica answers
            from ..admission.server import serve
            from ..eviction import EvictionGuard

            host, port, cert, key = webhook
            assert cert is not None and key is not None
            runner = await serve(port, cert, key, host, eviction=EvictionGuard(api))
        controller = Controller(api, ControllerConfig(workers=workers, namespace=namespace))
        if not leader_elect:
            await controller.run(stop)
            return
        from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
        from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

        identity = f"{socket.gethostname()}-{os.getpid()}"
        lock = LeaseLock(LEASE_NAME, lease_namespace, identity, api)

        async def lead() -> None:
            log.info("acquired Lease %s/%s as %s", lease_namespace, LEASE_NAME, identity)
            await controller.run(stop)

        async def lost() -> None:
            log.warning("lost Lease %s/%s: stopping", lease_namespace, LEASE_NAME)
            stop.set()

        election = leaderelection.LeaderElection(electionconfig.Config(lock, 15, 10, 2, lead, lost))
        elect = asyncio.create_task(election.run())
        await stop.wait()
        elect.cancel()
    finally:
        if runner is not None:  # first: the eviction webhook answers through ``api``
            await runner.cleanup()
        scope.use(None)
        await api.close()
