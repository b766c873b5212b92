"""The console entry of ``kthena-conformance``: what escapes a command becomes an exit code and
one line, never a stack trace unless asked for.

Click's standalone mode turns Ctrl-C into "Aborted!" and exit code 1, and lets any other exception
print its traceback; here a usage error is click's message and exit code 2, Ctrl-C or SIGTERM is
``interrupted`` and 130, a file the command could not read or write is one line naming it and 2,
and anything else is one line saying it is a bug, exit code 1. ``KTHENA_DEBUG=1`` prints the
stack trace before that line.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

import click

from ..cluster.errors import DEBUG_ENV, debugging
from ..framework.exit_codes import EXIT_INTERRUPTED, EXIT_NONCONFORMANT, EXIT_OK, EXIT_USAGE
from .base import main


def invoke(args: Sequence[str] | None = None) -> int:
    """Run the command line ``args`` (default: ``sys.argv[1:]``) and return its exit code."""
    try:
        code = main.main(args=list(args) if args is not None else None, prog_name="kthena-conformance",
                         standalone_mode=False)  # fmt: skip
    except SystemExit as done:
        return _code(done.code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except OSError as exc:
        _debug(exc)
        where = f"{exc.filename}: " if exc.filename else ""
        click.secho(f"error: {where}{exc.strerror or exc}", fg="red", err=True)
        click.echo("  -> check the path, its permissions and the free space there", err=True)
        return EXIT_USAGE
    except Exception as exc:
        _debug(exc)
        click.secho(f"error: internal error: {type(exc).__name__}: {_one_line(exc)}", fg="red", err=True)
        click.echo(f"  -> a bug in kthena-conformance: {DEBUG_ENV}=1 shows where; please report it", err=True)
        return EXIT_NONCONFORMANT
    return _code(code)


def _code(code: object) -> int:
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    click.echo(str(code), err=True)  # sys.exit("message"): Python prints it and exits 1
    return 1


def _debug(exc: BaseException) -> None:
    if debugging():
        traceback.print_exception(exc)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def run() -> None:  # pragma: no cover - the console script
    from ..run.signals import terminate_like_interrupt

    terminate_like_interrupt()
    sys.exit(invoke())
