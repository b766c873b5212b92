"""The run before any cluster: what the implementation declares and how it is started, the
profiles announced, and what ``--dry-run`` says it would do with each behaviour.

Its own module so :mod:`.orchestration` reads as the run's sequence, not its input checks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any

from ..cluster.errors import BadInput
from ..cluster.provider import Progress
from ..framework.catalog import source_text
from ..framework.realnodes import needs_real_nodes
from .accelerators import AcceleratorPlan
from .launch import Launch, LaunchError
from .options import (
    REFERENCE_SUPPORT,
    RunOptions,
)
from .progress import profile_lines


def _announce(options: RunOptions, plan: AcceleratorPlan, progress: Progress) -> None:
    """Print the profiles this run covers, every one it leaves out with the reason, and the
    accelerator drivers chosen by default."""
    from ..framework.features import PROFILES

    left_out = {"Accelerators": plan.left_out} if plan.left_out else {}
    for line in profile_lines(options.profiles, list(PROFILES), left_out):
        progress(line)
    if plan.by_default:
        for note in plan.notes:
            progress(note)


def _resolve_implementation(options: RunOptions, support: Any) -> RunOptions:
    """``auto`` made concrete: external when a command starts it (flag or support file), else the reference."""
    if options.implementation != "auto":
        return options
    starts = options.implementation_command is not None or getattr(support, "launch", None) is not None
    return dataclasses.replace(options, implementation="external" if starts else "reference")


def _launch(options: RunOptions, support: Any = None) -> Launch | None:
    """The implementation command to start, checked; None when the harness starts none. From the
    ``--implementation-*`` flags or the support file's ``launch`` (never both)."""
    from .launch import LaunchNames

    flags = bool(options.implementation_manifests or options.implementation_ready_log or options.implementation_webhook)
    declared = getattr(support, "launch", None)
    if declared is not None:
        if options.implementation_command is not None or flags:
            raise LaunchError(
                f"{declared.source}: launch: the support file already says how to start the implementation; "
                "drop --implementation-command/-manifest/-ready-log/-webhook (or the launch section)"
            )
        if options.implementation == "reference":
            raise LaunchError(
                f"{declared.source}: launch starts your implementation: run it with --implementation external "
                "(or leave --implementation out)"
            )
        return Launch.parse(
            declared.command,
            declared.ready_log,
            declared.ready_timeout,
            list(declared.manifests),
            declared.webhook,
            names=LaunchNames.of_file(declared.source),
            cwd=Path(declared.source).resolve().parent,
            also=list(declared.also),
        )
    if options.implementation_command is None:
        if flags:
            raise LaunchError(
                "--implementation-manifest, --implementation-ready-log and --implementation-webhook need "
                "--implementation-command"
            )
        return None
    if options.implementation == "reference":
        raise LaunchError(
            "--implementation-command starts your implementation: give --implementation external with it "
            "(and declare what it supports)"
        )
    return Launch.parse(
        options.implementation_command,
        options.implementation_ready_log,
        options.implementation_ready_timeout,
        options.implementation_manifests,
        options.implementation_webhook,
    )


def dry_run_verdict(
    b: Any, support: Any, provider: str, injects: frozenset[Any], no_real_nodes: str | None = None
) -> str:
    """What a run would do with behaviour ``b``: ``run``, ``not-supported``, or ``inconclusive
    here`` with the reason when the provider's clusters cannot inject a fault kind it needs (the
    catalog's ``faults``; a test known only to inject some fault needs the provider to inject any),
    or when it needs real nodes (its test calls ``realnodes.require``) and ``no_real_nodes`` says why
    the run would have none. Pure, but for reading the test's source."""
    if not all(support.supports(f) for f in b.features):
        return "not-supported"
    if no_real_nodes is not None and needs_real_nodes(source_text(b)):
        return f"inconclusive here: it needs real nodes ({no_real_nodes})"
    can = {str(f) for f in injects}
    lacking = [f for f in b.faults if f not in can]
    if lacking or (b.injects_faults and not can):
        kinds = ", ".join(lacking) if lacking else "faults"
        return f"inconclusive here: the {provider} provider cannot inject {kinds} into Pods (use the local provider)"
    return "run"


def _names(docs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{d['kind']} {d['metadata']['name']}" for d in docs)


def _deployed_by(options: RunOptions, launch: Launch | None) -> str:
    if options.implementation == "reference":
        return "harness"
    return "harness-command" if launch is not None else "external"


def _support(options: RunOptions) -> Any:
    from ..framework.support import SupportFileError, load_support, support_from_flags

    if options.support_file is not None:
        return load_support(options.support_file)
    if options.supported_features or options.all_features:
        return support_from_flags(
            options.implementation_name or options.implementation,
            options.implementation_version or "unknown",
            options.supported_features,
            options.all_features,
        )
    if options.implementation == "reference" or (
        options.implementation == "auto" and options.implementation_command is None
    ):
        return load_support(REFERENCE_SUPPORT)
    raise SupportFileError(
        "an external implementation must declare what it supports: --support-file FILE, "
        "--supported-features A,B or --all-features"
    )


def check_report_dir(directory: Path) -> None:
    """:class:`BadInput` when ``directory`` cannot take a report: it cannot be made, or a file
    cannot be written there (read-only, full). Leaves nothing behind."""
    made = [p for p in (directory, *directory.parents) if not p.exists()]
    probe = directory / f".write-check.{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"\0" * 4096)
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
    except OSError as exc:
        for path in made:  # the directories this check made, innermost first
            with contextlib.suppress(OSError):
                path.rmdir()
        raise BadInput(
            f"--report-dir {directory}: cannot write there ({exc.strerror or exc}); no report could be written",
            "free space there, or choose another --report-dir",
        ) from None
