"""The implementation under test as a command the harness starts, watches and stops.

Why this module exists: testing one's own controller should not need a hand-kept cluster and a
second terminal. With ``run --implementation-command "CMD ..."`` the harness applies the
implementation's manifests (its CRD, RBAC, webhook configuration: ``--implementation-manifest``),
starts CMD with ``KUBECONFIG`` pointing at the cluster and its output in
``REPORT_DIR/implementation.log``, waits until it is ready, runs the suite, and stops it. The
harness owns the process, so it can also restart it for the behaviours that need a restart
(:mod:`.restarts`), and it never outlives the run (:mod:`.watchdog`).

Ready means: the process is still running, every CRD the manifests define is Established, and,
when ``--implementation-ready-log`` gives a regular expression, a line of its output matches it
(the reference prints ``caches synced``). Without a pattern the harness waits a short settle time
instead and says so in the report; preflight then checks what the suite needs.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import yamlio
from ..cluster.errors import HarnessError

SETTLE_SECONDS = 3.0  # without a ready pattern: how long the command must stay up to count as started
READY_TIMEOUT = 60.0


class LaunchError(ValueError):
    """A launch option that cannot work (an empty command, a bad pattern), with the option named."""


@dataclass(frozen=True)
class LaunchNames:
    """What error messages call each launch setting: the run flags, or a support file's fields."""

    command: str = "--implementation-command"
    ready_log: str = "--implementation-ready-log"
    ready_timeout: str = "--implementation-ready-timeout"
    manifest: str = "--implementation-manifest"
    webhook: str = "--implementation-webhook"

    @classmethod
    def of_file(cls, source: str) -> LaunchNames:
        """The names in support file ``source``'s ``launch`` section."""
        return cls(
            command=f"{source}: launch.command",
            ready_log=f"{source}: launch.readyLog",
            ready_timeout=f"{source}: launch.readyTimeoutSeconds",
            manifest=f"{source}: launch.manifests:",
            webhook="webhook: true (in the launch section)",
        )


FLAGS = LaunchNames()


@dataclass(frozen=True)
class Launch:
    """What to start: argv (no shell), its ready pattern, extra environment."""

    command: tuple[str, ...]
    ready_log: re.Pattern[str] | None = None
    ready_timeout: float = READY_TIMEOUT
    env: dict[str, str] = field(default_factory=dict)
    manifests: tuple[Manifest, ...] = ()  # applied before the command starts (webhook configurations: once ready)
    webhook: bool = False  # the harness makes a loopback certificate and port for the command's webhook
    # Where the command runs: a support file's directory (its relative paths, the program's included, resolve
    # there, as its manifests do); the runner's working directory for the --implementation-* flags.
    cwd: Path | None = None
    # Further commands (argv each; a support file's launch.also), started after ``command`` is ready, each
    # ready once it stayed up; a restart of the implementation restarts ``command`` only.
    also: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def parse(
        cls,
        command: str,
        ready_log: str | None = None,
        ready_timeout: float = READY_TIMEOUT,
        manifests: list[Path] | None = None,
        webhook: bool = False,
        names: LaunchNames = FLAGS,
        cwd: Path | None = None,
        also: list[str] | None = None,
    ) -> Launch:
        """From the command line (or a support file's ``launch``, ``names`` naming its fields):
        ``command`` split as a POSIX shell would (quotes), never run by one; ``manifests`` read and
        checked now, before any cluster exists."""
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise LaunchError(f"{names.command}: cannot split {command!r}: {exc}") from None
        if not argv:
            raise LaunchError(f"{names.command}: empty; give the program to start and its arguments")
        extra: list[tuple[str, ...]] = []
        for i, text in enumerate(also or []):
            try:
                split = tuple(shlex.split(text))
            except ValueError as exc:
                raise LaunchError(f"{names.command} (also[{i}]): cannot split {text!r}: {exc}") from None
            if not split:
                raise LaunchError(f"{names.command} (also[{i}]): empty; give the program to start and its arguments")
            extra.append(split)
        pattern = None
        if ready_log:
            try:
                pattern = re.compile(ready_log)
            except re.error as exc:
                raise LaunchError(f"{names.ready_log}: {ready_log!r} is not a regular expression: {exc}") from None
        if ready_timeout <= 0:
            raise LaunchError(f"{names.ready_timeout}: must be above 0, got {ready_timeout:g}")
        read = tuple(read_manifests(manifests or [], names.manifest))
        if not webhook:
            every = [a for command in (argv, *extra) for a in command]
            used = [f"{{{p}}}" for p in PLACEHOLDERS if any(f"{{{p}}}" in a for a in every) or any(
                f"{{{p}}}" in yaml.safe_dump(doc) for _, doc in read)]  # fmt: skip
            if used:
                raise LaunchError(
                    f"{names.command}/{names.manifest.rstrip(':')} use {', '.join(used)}: add "
                    f"{names.webhook} for the harness to make the webhook's port and certificate"
                )
        return cls(argv, pattern, ready_timeout, manifests=read, webhook=webhook, cwd=cwd, also=tuple(extra))

    def describe(self) -> str:
        return shlex.join(self.command)


Manifest = tuple[str, dict[str, Any]]  # (where: "<file>: document <n> (<kind> <name>)", the object)


def read_manifests(paths: list[Path], option: str = FLAGS.manifest) -> list[Manifest]:
    """Every object of the YAML files ``paths``, in order, each with where it came from;
    :class:`LaunchError` naming the file (and document) when one cannot be read or is not an
    object with apiVersion, kind and metadata.name."""
    out: list[Manifest] = []
    for path in paths:
        try:
            docs = [d for d in yamlio.load_all(path.read_text()) if d is not None]
        except (OSError, yaml.YAMLError) as exc:
            raise LaunchError(f"{option} {path}: cannot read it: {exc}") from None
        for i, doc in enumerate(docs, start=1):
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            if (
                not isinstance(doc, dict)
                or not doc.get("apiVersion")
                or not doc.get("kind")
                or not (isinstance(meta, dict) and meta.get("name"))
            ):
                raise LaunchError(
                    f"{option} {path}: document {i} is not a Kubernetes object "
                    "(apiVersion, kind and metadata.name are required)"
                )
            out.append((f"{path}: document {i} ({doc['kind']} {meta['name']})", doc))
    return out


def crds_of(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions among ``manifests``. Pure."""
    return [doc for _, doc in manifests if doc.get("kind") == "CustomResourceDefinition"]


WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
PLACEHOLDERS = ("webhook_port", "webhook_cert", "webhook_key", "webhook_ca", "webhook_ca_bundle")


@dataclass(frozen=True)
class LoopbackWebhook:
    """What the harness made for a webhook the command serves on loopback: a free port, a serving
    certificate for 127.0.0.1 and localhost, and the CA the API server is told to trust."""

    port: int
    cert: Path
    key: Path
    ca: Path
    ca_pem: bytes

    def values(self) -> dict[str, str]:
        """Each placeholder's value (``{webhook_ca_bundle}``: the CA, base64, as caBundle wants it)."""
        return {
            "webhook_port": str(self.port),
            "webhook_cert": str(self.cert),
            "webhook_key": str(self.key),
            "webhook_ca": str(self.ca),
            "webhook_ca_bundle": base64.b64encode(self.ca_pem).decode(),
        }

    def env(self) -> dict[str, str]:
        return {f"KTHENA_CONFORMANCE_{k.upper()}": v for k, v in self.values().items() if k != "webhook_ca_bundle"}


def substitute(value: Any, values: dict[str, str]) -> Any:
    """``value`` (a string, or lists and mappings of them) with every ``{name}`` of ``values``
    replaced; other braces are left alone (no str.format: a JSON argument must survive). Pure."""
    if isinstance(value, str):
        for name, replacement in values.items():
            value = value.replace("{" + name + "}", replacement)
        return value
    if isinstance(value, list):
        return [substitute(v, values) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, values) for k, v in value.items()}
    return value


def is_webhook_configuration(doc: dict[str, Any]) -> bool:
    return doc.get("kind") in WEBHOOK_KINDS


def environment(kubeconfig: Path, extra: dict[str, str]) -> dict[str, str]:
    """The command's environment: the runner's, ``KUBECONFIG`` set to the cluster's, then ``extra``. Pure."""
    return {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1", **extra}


def ready_problem(log_tail: str, pattern: re.Pattern[str] | None, up_for: float) -> str | None:
    """Why the command is not ready yet (None when it is), from its output so far and how long it
    has run. Pure."""
    if pattern is not None:
        return None if pattern.search(log_tail) else f"no line of its output matches {pattern.pattern!r} yet"
    return None if up_for >= SETTLE_SECONDS else f"up for {up_for:.1f}s of the {SETTLE_SECONDS:g}s settle time"


@dataclass
class RunningCommand:
    """The started implementation: stop it, restart it, read its log."""

    launch: Launch
    kubeconfig: Path
    log: Path
    owner_pid: int
    webhook: LoopbackWebhook | None = None
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    def argv(self) -> list[str]:
        """The command, its webhook placeholders filled in."""
        values = self.webhook.values() if self.webhook else {}
        return [substitute(arg, values) for arg in self.launch.command]

    def start(self) -> None:
        """Start the command under the watchdog and wait until it is ready (:class:`HarnessError`
        naming the log if it exits or is not ready in time)."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        argv = [sys.executable, "-m", "conformance.run.watchdog", "--owner", str(self.owner_pid), "--", *self.argv()]
        env = environment(self.kubeconfig, {**self.launch.env, **(self.webhook.env() if self.webhook else {})})
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                cwd=self.launch.cwd,
            )
        started = time.monotonic()
        deadline = started + self.launch.ready_timeout
        problem: str | None = "not started"
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise HarnessError(
                    f"the implementation command exited with code {code} before it was ready: {self.launch.describe()}",
                    f"its output is in {self.log}",
                )
            tail = self.log.read_bytes()[offset:].decode("utf-8", "replace")
            problem = ready_problem(tail, self.launch.ready_log, time.monotonic() - started)
            if problem is None:
                return
            time.sleep(0.1)
        self.stop()
        raise HarnessError(
            f"the implementation command was not ready within {self.launch.ready_timeout:g}s ({problem}): "
            f"{self.launch.describe()}",
            f"its output is in {self.log}; --implementation-ready-log (launch.readyLog) sets what 'ready' means",
        )

    def stop(self, timeout: float = 20.0) -> None:
        """Ask the watchdog to end the command's process group; SIGKILL the watchdog if it hangs."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop and start again (same command, log appended), ready as at the first start."""
        self.stop()
        self.start()
        self.restarts += 1


@dataclass
class CommandGroup:
    """The implementation's commands once started: the first (its controller) and the ``also`` ones.
    Reads as a :class:`RunningCommand`: the first one's log, a restart restarts it alone, a stop stops
    them all, the last started first."""

    main: RunningCommand
    others: list[RunningCommand] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.main.log

    def start(self) -> None:
        """Start the first command, then each other one (ready once it stayed up); on a failure
        the ones already started are stopped."""
        self.main.start()
        started: list[RunningCommand] = []
        try:
            for other in self.others:
                other.start()
                started.append(other)
        except BaseException:
            for done in reversed(started):
                done.stop()
            self.main.stop()
            raise

    def stop(self, timeout: float = 20.0) -> None:
        for other in reversed(self.others):
            other.stop(timeout)
        self.main.stop(timeout)

    def restart(self) -> None:
        self.main.restart()


def group(
    launch: Launch, kubeconfig: Path, log: Path, owner_pid: int, webhook: LoopbackWebhook | None = None
) -> CommandGroup:
    """The commands of ``launch`` as a :class:`CommandGroup` (not started): the ``also`` ones log to
    ``implementation-also-<n>.log`` beside ``log``, share its webhook and directory."""
    others = [
        RunningCommand(
            Launch(argv, None, launch.ready_timeout, dict(launch.env), cwd=launch.cwd),
            kubeconfig,
            log.with_name(f"implementation-also-{i + 1}.log"),
            owner_pid,
            webhook=webhook,
        )
        for i, argv in enumerate(launch.also)
    ]
    return CommandGroup(RunningCommand(launch, kubeconfig, log, owner_pid, webhook=webhook), others)
