"""Failure classification: a trial's ending in, its verdict (status, reason, evidence, confidence) out.

Three layers, each its own module:

* `patterns`: the table (data): one row per failure ladder recognises, each backed by real output.
* `rules`: pure: which matched line is the root cause, and how sure the verdict is (text and exit facts in).
* `files` and `cli`: reading a trial folder from disk, and `python -m ladder.failures`.

Everything callers used from the former single module is re-exported here; the file layer only on first use, so
that importing the pure part (`patterns`, `rules`) never loads `logging` (and with it `threading`).
"""

from __future__ import annotations

from ladder.failures.patterns import PATTERNS, Pattern, Tier, is_memory, status_of
from ladder.failures.rules import (
    EVIDENCE_CHARS,
    Hit,
    as_json,
    classify,
    classify_text,
    describe_exit,
    find_hits,
    root_hit,
    telling_line,
)

__all__ = [
    "EVIDENCE_CHARS", "PATTERNS", "TAIL_BYTES", "Hit", "Pattern", "Tier", "as_json", "classify", "classify_text",
    "describe_exit", "find_hits", "folder_logs", "is_memory", "load_ending", "main", "rank_log_paths",
    "read_error_files", "root_hit", "status_of", "telling_line",
]  # fmt: skip


_FILE_LAYER = frozenset({"TAIL_BYTES", "folder_logs", "load_ending", "rank_log_paths", "read_error_files"})


def __getattr__(name: str) -> object:
    """The file layer's names, imported on first use."""
    if name in _FILE_LAYER:
        from ladder.failures import files

        return getattr(files, name)
    raise AttributeError(f"module 'ladder.failures' has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """`python -m ladder.failures`: see `ladder.failures.cli`."""
    from ladder.failures import cli

    return cli.main(argv)
