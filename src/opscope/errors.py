"""The one exception hierarchy of opscope.

Library code raises these; the CLI turns them into a one-line message and an exit code in exactly one place
(`opscope.cli.main`). Messages are safe to print: control characters in quoted paths and names come out as
visible escapes (`opscope.untrusted.visible`). Nothing else in the package prints tracebacks or calls `sys.exit`.
"""

from __future__ import annotations

from opscope.untrusted import visible


class OpscopeError(Exception):
    """Base class: a problem the user can act on. `exit_code` is what the CLI returns."""

    exit_code: int = 2

    def __str__(self) -> str:
        # Messages quote paths and names from traces: never let them carry terminal control sequences.
        return visible(super().__str__())


class InputError(OpscopeError):
    """The input is missing, unreadable, or not a trace we understand."""

    exit_code = 2


class NotReadYet(InputError):
    """A format opscope recognises but has no reader for yet (an AMD rocpd database, ...): said plainly, so
    that it is not mistaken for a damaged file of another format (tests over the corpus skip such files)."""

    exit_code = 2


class UsageError(OpscopeError):
    """Options that contradict each other or are out of range."""

    exit_code = 2


class OutputError(OpscopeError):
    """An output cannot be written: a full disk or device, a closed or read-only destination."""

    exit_code = 2


class GateFailed(OpscopeError):
    """A regression gate tripped (`opscope diff --fail-above`)."""

    exit_code = 1


class ValidityFailed(OpscopeError):
    """`--strict`: an error-level validity check fired on a trace (docs/validity.md), after the output."""

    exit_code = 1


class MissingDependency(OpscopeError):
    """An optional extra (torch, dask, ...) is needed for this feature."""

    exit_code = 2


class OutOfMemory(OpscopeError):
    """Memory or address space ran out: an allocation failed, or the address-space limit (`ulimit -v`) is
    below what opscope needs (`opscope.cli.address_space`)."""

    exit_code = 2


class ClusterError(OpscopeError):
    """Parallel or distributed execution failed: unreachable scheduler, a worker that died, no workers."""

    exit_code = 2


class ScriptFailed(OpscopeError):
    """A script run under `opscope run` raised or exited non-zero; the exit code follows the script's."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code if exit_code > 0 else 1
