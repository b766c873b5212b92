"""The one error type the harness raises at its users.

Every failure a user can cause or fix (an unknown provider, a missing Go toolchain, a port in use,
a corrupt binary cache, a component that crashes at start) is a :class:`HarnessError` carrying what
happened and what to do about it. The CLI prints these as two lines and exits non-zero; it never
shows a stack trace for them.
"""

from __future__ import annotations


class HarnessError(Exception):
    """A failure with a message for the user and a hint saying what to do next."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  -> {self.hint}" if self.hint else self.message


class UnsupportedOperation(HarnessError):
    """A provider cannot do what was asked (for example a fault it cannot inject).

    The conformance suite reports a test that needs such an operation as not-supported, never as
    passed.
    """
