"""`python -m opscope.history.window_add`: add windows of a sampling run to the run history, in a process of its
own, so that reading and reducing a window's trace never adds to the memory or the imports of the training
process being sampled (its resident memory is one of the figures watched: docs/drift.md).

Reads one JSON object on standard input, {"db": URL or null, "windows": [{"path", "sampling_run", "index",
"first_step", "last_step", "started_at", "extra": [[scope, key, metric, value], ...]}, ...]}, and writes one JSON
line: {"added": [run id or null, ...], "errors": [message or null, ...]}, in the windows' order. Exit status 0
even when a window failed (its error says why; the caller keeps its trace).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opscope.errors import OpscopeError


def add_windows(request: dict[str, Any]) -> dict[str, list[Any]]:
    from opscope.history.api import History
    from opscope.history.runs import Window

    added: list[int | None] = []
    errors: list[str | None] = []
    with History(request.get("db")) as history:
        for item in request.get("windows", []):
            try:
                result = history.add(
                    item["path"],
                    tags={"sampling_run": item["sampling_run"], "window": str(item["index"])},
                    cache=False,
                    window=Window(
                        item["sampling_run"],
                        int(item["index"]),
                        item.get("first_step"),
                        item.get("last_step"),
                        item.get("started_at"),
                    ),
                    extra=[(str(a), str(b), str(c), float(d)) for a, b, c, d in item.get("extra", [])],
                )
            except (OpscopeError, OSError, KeyError, TypeError, ValueError) as exc:
                added.append(None)
                errors.append(
                    f"{type(exc).__name__}: {exc}" if not isinstance(exc, OpscopeError) else str(exc)
                )
            else:
                added.append(result.run_id)
                errors.append(None)
    return {"added": added, "errors": errors}


def main() -> int:
    try:
        request = json.loads(sys.stdin.read())
        reply = add_windows(request)
    except (OpscopeError, ValueError) as exc:  # the history could not be opened: every window failed alike
        count = len(request.get("windows", [])) if isinstance(locals().get("request"), dict) else 0
        reply = {"added": [None] * count, "errors": [str(exc)] * count}
    sys.stdout.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
