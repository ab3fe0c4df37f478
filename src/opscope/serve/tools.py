"""The tools `opscope mcp` offers, as data: each is one CLI subcommand, its path arguments, and the options an
agent may pass, each with its JSON schema and how it becomes a command-line argument.

A tool call becomes the command line `opscope COMMAND PATH... OPTIONS... --format json`, run in-process by the
CLI's own code (cli/mcp.py), so a tool answers exactly what the command prints. Options that write files
(`-o`, `--html`), CI gates (`--fail-*`), rule files and parallel execution are not offered: the server reads
traces and writes nothing but the trace cache. Nor is `diff --key-op`, whose pattern Python's backtracking `re`
matches (a pattern from an agent could run for hours); the other patterns (`filter`, `what_if`) are matched by
polars' regex engine, which does not backtrack. Adding a tool for a new subcommand is one `Tool(...)` line in
`TOOLS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opscope.analysis.attribution import FRAME_GROUPS
from opscope.model.kinds import GPU_KINDS
from opscope.serve.bounds import MIN_CHARS
from opscope.serve.roots import NCU_CSV, TRACE, TRACE_OR_SNAPSHOT

MAX_CHARS = 20_000  # default bound of one answer, in characters of JSON

# How an option's value becomes arguments.
VALUE = "value"  # --flag=VALUE
FLAG = "flag"  # --flag when true
TOGGLE = "toggle"  # --flag when true, --no-flag when false (argparse's BooleanOptionalAction)
REPEAT = "repeat"  # --flag=ITEM for each item of a list
JOINED = "joined"  # --flag=A,B,C


@dataclass(frozen=True)
class Option:
    name: str  # the argument's name in a tool call
    flag: str  # the command-line option
    schema: Mapping[str, Any]  # JSON schema of the value, with its description
    form: str = VALUE
    path: str | None = None  # the value is a file of this kind, checked against the roots like the traces

    def argv(self, value: Any) -> list[str]:
        if self.form == FLAG:
            return [self.flag] if value else []
        if self.form == TOGGLE:
            return [self.flag if value else "--no-" + self.flag.removeprefix("--")]
        # `--flag=VALUE`: a value that starts with `-` (a regular expression) is not taken for an option
        if self.form == REPEAT:
            return [f"{self.flag}={item}" for item in value]
        if self.form == JOINED:
            return [f"{self.flag}={','.join(str(item) for item in value)}"]
        return [f"{self.flag}={value}"]


@dataclass(frozen=True)
class Tool:
    name: str
    command: str  # the opscope subcommand
    description: str
    options: tuple[Option, ...] = ()
    inputs: tuple[str, ...] = ("trace",)  # path arguments, in the command's order
    kind: str = TRACE  # what the input files must be

    def input_schema(self) -> dict[str, Any]:
        properties: dict[str, Any] = {name: dict(PATHS[name]) for name in self.inputs}
        properties.update({o.name: dict(o.schema) for o in self.options})
        properties.update({o.name: dict(o.schema) for o in PAGING})
        return {
            "type": "object",
            "properties": properties,
            "required": list(self.inputs),
            "additionalProperties": False,
        }

    def argv(self, paths: Sequence[str], arguments: Mapping[str, Any]) -> list[str]:
        """The command line of a call (`paths`: the input files, already checked against the roots)."""
        out = [self.command, *paths]
        for option in self.options:
            if arguments.get(option.name) is not None:
                out += option.argv(arguments[option.name])
        return [*out, "--format", "json"]


PATH_TEXT = "relative to the server's first root, or absolute; it must lie under one of the server's roots"
PATHS: dict[str, Mapping[str, Any]] = {
    "trace": {"type": "string", "description": f"trace file, or a folder (its newest trace); {PATH_TEXT}"},
    "base": {"type": "string", "description": f"the trace before (file or folder); {PATH_TEXT}"},
    "new": {"type": "string", "description": f"the trace after (file or folder); {PATH_TEXT}"},
}
PAGING = (
    Option(
        "max_chars",
        "",
        {
            "type": "integer",
            "minimum": MIN_CHARS,
            "default": MAX_CHARS,
            "description": "the answer's bound in characters of JSON: rows past it are left for the next page "
            "(truncated: true, next_cursor), never fields",
        },
    ),
    Option(
        "cursor",
        "",
        {"type": "string", "description": "next_cursor of the previous answer, to get the next page of rows"},
    ),
)


def top(default: int) -> Option:
    return Option(
        "top",
        "--top",
        {"type": "integer", "minimum": 0, "default": default, "description": "rows per table (0 = all)"},
    )


def _ints(what: str) -> Mapping[str, Any]:
    return {"type": "array", "items": {"type": "integer"}, "description": f"only these {what}"}


DEVICE = Option("device", "--device", _ints("GPUs (device indices)"), JOINED)
STREAM = Option("stream", "--stream", _ints("streams"), JOINED)
STEPS = Option(
    "steps",
    "--steps",
    {
        "type": "string",
        "description": "only these ProfilerStep numbers: 3, 3-5 or 2,4 (default: the whole trace)",
    },
)
SELECTION = (DEVICE, STREAM, STEPS)
REGEX = "a regular expression over the names"
BY_SHAPE = Option(
    "by_shape", "--by-shape", {"type": "boolean", "description": "one row per (op, input shapes)"}, FLAG
)


TOOLS: tuple[Tool, ...] = (
    Tool(
        "brief",
        "brief",
        "Start here: a plain-language summary of a trace in at most 15 lines: what the capture is, where the "
        "GPU time goes, the top fixes with their predicted savings and the code they point at.",
        SELECTION,
    ),
    Tool(
        "summary",
        "summary",
        "GPU time per kernel / memcpy / memset: calls, total, mean, min, max, median, share.",
        (
            top(30),
            Option(
                "kind",
                "--kind",
                {"type": "array", "items": {"enum": list(GPU_KINDS)}, "description": "only these kinds"},
                REPEAT,
            ),
            Option("filter", "--filter", {"type": "string", "description": f"only names matching {REGEX}"}),
            *SELECTION,
        ),
    ),
    Tool(
        "analyze",
        "analyze",
        "One-page diagnosis: GPU busy / idle and why, kernel categories, top kernels and ops, launch delay, "
        "synchronisations, memory copies, steps, and the findings.",
        (top(10), *SELECTION),
    ),
    Tool(
        "advise",
        "advise",
        "What to fix first: findings (rules with evidence and advice), the most GPU time at stake first, with "
        "predicted savings from the critical path where the remedy can be modelled.",
        SELECTION,
    ),
    Tool(
        "ops",
        "ops",
        "Per operator: calls, CPU total / self time, GPU time of the kernels it launched (inclusive and self).",
        (
            BY_SHAPE,
            Option(
                "efficiency",
                "--efficiency",
                {"type": "boolean", "description": "add TFLOP/s, % of peak and compute / memory bound"},
                FLAG,
            ),
            Option(
                "sort",
                "--sort",
                {
                    "enum": ["self", "total"],
                    "default": "self",
                    "description": "rank by GPU self or total time",
                },
            ),
            top(30),
            *SELECTION,
        ),
    ),
    Tool(
        "steps",
        "steps",
        "Per ProfilerStep: wall, GPU busy, kernel, memcpy, communication and idle time; the slowest marked.",
        SELECTION,
    ),
    Tool(
        "lines",
        "lines",
        "GPU time by the line of the user's Python code that launched it (traces recorded with with_stack=True): "
        "frame, GPU time, share, kernels, top ops and kernels, CPU self time; what no frame explains.",
        (
            top(30),
            Option(
                "depth",
                "--depth",
                {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "frames of the user's code per row",
                },
            ),
            Option(
                "skip_prefix",
                "--skip-prefix",
                {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "description": "also skip frames whose file starts with one of these prefixes",
                },
                REPEAT,
            ),
            Option(
                "keep",
                "--keep",
                {
                    "type": "array",
                    "items": {"enum": list(FRAME_GROUPS)},
                    "description": "count these framework groups' frames as the user's code",
                },
                REPEAT,
            ),
            *SELECTION,
        ),
    ),
    Tool(
        "critical_path",
        "critical-path",
        "The chain of dependent work that bounds each step, its breakdown by kind, and what-if predictions.",
        (
            STEPS,
            Option(
                "what_if",
                "--what-if",
                {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "REGEX:FACTOR items: rescale the events whose name matches REGEX by FACTOR "
                    "(0 removes them) and predict the step time, e.g. 'gemm|cutlass:0.5'",
                },
                REPEAT,
            ),
            top(10),
        ),
    ),
    Tool(
        "memory",
        "memory",
        "Memory per device from a profile_memory trace or an allocator snapshot: peak, who allocates, what is "
        "live at the end.",
        (
            Option(
                "device",
                "--device",
                {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "only these devices: cuda:0, hip:1, cpu, or a bare GPU index",
                },
                JOINED,
            ),
            STEPS,
            top(20),
        ),
        kind=TRACE_OR_SNAPSHOT,
    ),
    Tool(
        "kernels",
        "kernels",
        "Per kernel: launch configuration, theoretical occupancy and limiter; with metrics, Nsight Compute "
        "figures joined by name and launch order.",
        (
            Option(
                "metrics",
                "--metrics",
                {"type": "string", "description": f"an Nsight Compute CSV export to join; {PATH_TEXT}"},
                path=NCU_CSV,
            ),
            top(30),
            Option("filter", "--filter", {"type": "string", "description": f"only kernels matching {REGEX}"}),
        ),
    ),
    Tool(
        "diff",
        "diff",
        "Compare two traces (NEW - BASE): headline figures, kernels, operators, memory and findings, the "
        "biggest changes first.",
        (
            Option(
                "per_step",
                "--per-step",
                {
                    "type": "boolean",
                    "description": "divide totals by each trace's step count (default: when both have steps)",
                },
                TOGGLE,
            ),
            BY_SHAPE,
            Option(
                "min_delta",
                "--min-delta",
                {"type": "string", "description": "hide rows changing less than this: 50us, 1ms or 2%"},
            ),
            top(30),
        ),
        inputs=("base", "new"),
    ),
    Tool("formats", "formats", "The trace formats opscope reads (detected by content).", inputs=()),
)
BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}
