"""The root command group and what every command shares: the progress printer, the one-line
error (message and hint), the provider options and the ``KEY=VALUE`` / taint parsers.

Its own module so the command modules of :mod:`conformance.cli` import it and not each other.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..cluster.errors import BadInput, HarnessError, debugging
from ..cluster.registry import PROVIDER_NAMES

F = TypeVar("F", bound=Callable[..., Any])


def _progress_printer() -> Callable[[str], None]:
    started = time.monotonic()

    def show(message: str) -> None:
        click.echo(f"[{time.monotonic() - started:6.1f}s] {message}", err=True)

    return show


def _fail(exc: HarnessError) -> None:
    """Print ``exc`` as its message and hint (its stack trace first with ``KTHENA_DEBUG=1``) and exit:
    2 for bad input, else 1."""
    if debugging():
        traceback.print_exception(exc)
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"  -> {exc.hint}", err=True)
    sys.exit(2 if isinstance(exc, BadInput) else 1)


def provider_options(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--provider",
                "provider_name",
                envvar="KTHENA_PROVIDER",
                show_envvar=True,
                default="local",
                show_default=True,
                help=f"one of: {', '.join(PROVIDER_NAMES)}",
            ),
            click.option("--name", default="kthena", show_default=True, help="cluster name"),
            click.option(
                "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="existing provider: kubeconfig"
            ),
            click.option("--context", default=None, help="existing provider: kubeconfig context"),
        ]
    ):
        func = option(func)
    return func


def _parse_kv(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"{what} {item!r} is not KEY=VALUE", f"write it as --{what} key=value")
        out[key] = value
    return out


def _parse_taints(values: tuple[str, ...]) -> list[dict[str, str]]:
    """``KEY[=VALUE]:EFFECT`` strings as taint dicts; the spec validation checks their content."""
    taints = []
    for item in values:
        kv, sep, effect = item.rpartition(":")
        key, _, value = kv.partition("=")
        if not sep or not key:
            raise BadInput(
                f"node-taint {item!r} is not KEY[=VALUE]:EFFECT", "for example --node-taint gpu=true:NoSchedule"
            )
        taints.append({"key": key, "value": value, "effect": effect})
    return taints


@click.group()
@click.version_option(package_name="kthena-conformance")
def main() -> None:
    """Kthena ModelServing conformance: run the suite; clusters, binaries, support and capability
    files, reports."""
