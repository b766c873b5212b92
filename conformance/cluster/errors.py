"""The one error type the harness raises at its users.

Every failure a user can cause or fix (an unknown provider, a missing Go toolchain, a port in use,
a corrupt binary cache, a component that crashes at start) is a :class:`HarnessError` carrying what
happened and what to do about it. The CLI prints these as two lines and exits non-zero; it
shows a stack trace only when asked (``KTHENA_DEBUG=1``, :func:`debugging`). A :class:`BadInput`
is one the user's input caused (an option, a file, an environment variable): exit code 2.
"""

from __future__ import annotations

import os

DEBUG_ENV = "KTHENA_DEBUG"


class HarnessError(Exception):
    """A failure with a message for the user and a hint saying what to do next."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  -> {self.hint}" if self.hint else self.message


class BadInput(HarnessError):
    """What the user gave is wrong (an unknown provider, a kubeconfig that is not one, a report
    directory that cannot be written): the message names the option, file or variable."""


def debugging() -> bool:
    """Whether ``KTHENA_DEBUG`` asks for stack traces (any value but empty and ``0``)."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


class UnsupportedOperation(HarnessError):
    """A provider cannot do what was asked (for example a fault it cannot inject).

    The conformance suite reports a test that needs such an operation as not-supported, never as
    passed.
    """
