"""Which kinds of Pod fault a test injects, read from its code, so a run knows before it starts
whether the chosen cluster can run it.

Why this module exists: providers inject different faults (the embedded cluster all of them, kind
only container restarts, an existing cluster none), and a test needing one its cluster lacks is
inconclusive. ``run --dry-run`` and the catalog say so per test only if the fault kinds each test
uses are known without running it. Declaring them by hand would drift from the code; they are
read from it instead: every ``Fault.<KIND>`` the test function names, and the ones named by the
suite functions it calls, followed transitively (the suites' fault helpers live in the suites,
beside their tests or shared between them; framework code names no fault kind). The catalog
records the result (``faults``), and a unit test checks that every test taking the ``faults``
fixture names at least one kind.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from ..cluster.faults import Fault

SUITES = "conformance.suites"  # helpers are followed into the suites' modules, not beyond


def faults_used(func: Callable[..., Any]) -> tuple[Fault, ...]:
    """The fault kinds ``func`` and the same-module functions it calls name, in enum order."""
    found: set[str] = set()
    seen: set[Callable[..., Any]] = set()
    todo = [func]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(current)))
        except (OSError, TypeError, SyntaxError):
            continue
        module = sys.modules.get(current.__module__)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Fault":
                found.add(node.attr)
            elif isinstance(node, ast.Name) and module is not None:
                called = getattr(module, node.id, None)
                if inspect.isfunction(called) and called.__module__.startswith(SUITES):
                    todo.append(called)
    return tuple(f for f in Fault if f.name in found)
