"""The profiling schedule: validation, the `steps=N` shorthand, and the same actions as torch.profiler.schedule."""

from __future__ import annotations

import itertools
import warnings

import pytest

from opscope.capture.schedule import NONE, RECORD, RECORD_AND_SAVE, WARMUP, Schedule
from opscope.errors import UsageError


def test_steps_is_the_first_n_steps():
    schedule = Schedule.build(3)
    assert [schedule.action(i) for i in range(5)] == [RECORD, RECORD, RECORD_AND_SAVE, NONE, NONE]
    assert schedule.steps_needed == 3 and schedule.first_recorded_step == 0
    assert schedule.describe() == "active=3"


def test_whole_run_records_every_step():
    schedule = Schedule.build()
    assert schedule.whole_run and schedule.steps_needed is None
    assert {schedule.action(i) for i in range(100)} == {RECORD}


def test_full_schedule_phases():
    schedule = Schedule.build(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    actions = [schedule.action(i) for i in range(11)]
    assert actions == [
        NONE,
        NONE,
        WARMUP,
        RECORD,
        RECORD_AND_SAVE,
        NONE,
        WARMUP,
        RECORD,
        RECORD_AND_SAVE,
        NONE,
        NONE,
    ]
    assert schedule.steps_needed == 9 and schedule.first_recorded_step == 3
    assert schedule.describe() == "skip_first=1, wait=1, warmup=1, active=2, repeat=2"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"steps": 0}, "steps must be a positive number"),
        ({"steps": -2}, "steps must be a positive number"),
        ({"steps": True}, "steps must be a whole number"),
        ({"steps": 2.5}, "steps must be a whole number"),
        ({"steps": 2, "active": 2}, "not both"),
        ({"active": 0}, "active must be a positive number"),
        ({"active": 2, "wait": -1}, "wait must be 0 or more"),
        ({"active": 2, "repeat": -1}, "repeat must be 0 or more"),
        ({"wait": 2}, "need active=N"),
    ],
)
def test_bad_schedules_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        Schedule.build(**kwargs)


def test_same_actions_as_torch_schedule():
    torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")
    names = {
        torch.profiler.ProfilerAction.NONE: NONE,
        torch.profiler.ProfilerAction.WARMUP: WARMUP,
        torch.profiler.ProfilerAction.RECORD: RECORD,
        torch.profiler.ProfilerAction.RECORD_AND_SAVE: RECORD_AND_SAVE,
    }
    for wait, warmup, active, repeat, skip in itertools.product(
        (0, 1, 3), (0, 2), (1, 2, 4), (0, 1, 3), (0, 2)
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about warmup=0
            theirs = torch.profiler.schedule(
                wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip
            )
        ours = Schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip)
        assert [ours.action(i) for i in range(40)] == [names[theirs(i)] for i in range(40)]
