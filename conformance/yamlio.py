"""YAML through libyaml where PyYAML was built with it: the files the harness parses on every run
are large (the LeaderWorkerSet CRD is 1.2 MB, the reference's CRDs 0.6 MB, the spec map 0.1 MB),
and PyYAML's pure-Python parser spends seconds on them; libyaml takes a tenth of that. A
self-validation pass parses them once per variant, on a machine whose cores its clusters share.

Files people write (support and capability files) keep the pure-Python parser: its messages
are the ones the error tests pin. Falls back to the pure-Python classes when libyaml is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    """``yaml.safe_load`` through libyaml."""
    return yaml.load(text, Loader=Loader)


def load_all(text: str) -> Iterator[Any]:
    """``yaml.safe_load_all`` through libyaml."""
    return yaml.load_all(text, Loader=Loader)


def dump(data: Any, **options: Any) -> str:
    """``yaml.safe_dump`` through libyaml (same options)."""
    return str(yaml.dump(data, Dumper=Dumper, **options))


def dump_all(documents: list[Any], **options: Any) -> str:
    """``yaml.safe_dump_all`` through libyaml (same options)."""
    return str(yaml.dump_all(documents, Dumper=Dumper, **options))


def problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: ``line L, column C: what is wrong`` (the parser's text is several)."""
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or " ".join(str(exc).split())
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{what}"
