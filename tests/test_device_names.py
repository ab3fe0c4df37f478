"""Which description names a device (issue 12 follow-up): a process that sees one GPU may report its work
under another index than its `deviceProperties` entry (the MI300X Qwen trace: kernels on device 2, one
description with id 0, recorded under HIP_VISIBLE_DEVICES). Every command names the device the same way, and
the efficiency peaks and launch limits follow the description."""

from __future__ import annotations

import json

import pytest

from conftest import corpus_path
from opscope.model.meta import DeviceInfo, TraceMeta

QWEN_MI300 = "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300 = "AMD Instinct MI300X VF"


def _meta(*devices: tuple[int, str]) -> TraceMeta:
    return TraceMeta(
        path="hand-made", format="kineto", devices=tuple(DeviceInfo(id=i, name=n) for i, n in devices)
    )


def test_describe_by_id_then_the_only_description() -> None:
    one = _meta((0, "A"))
    assert one.describe(0) is one.devices[0] and one.describe(2) is one.devices[0]
    two = _meta((0, "A"), (1, "B"))
    assert two.describe(1) is two.devices[1] and two.describe(2) is None
    assert _meta().describe(0) is None


def test_used_device_names() -> None:
    assert _meta((0, "A")).used_device_names([2, 2]) == ("A",)
    assert _meta((0, "A"), (1, "B")).used_device_names([1, 3]) == ("B", "device 3")
    assert _meta((0, "A"), (1, "A")).used_device_names([0, 1]) == ("A",)
    assert _meta((0, "A"), (1, "B")).used_device_names([]) == ("A", "B")  # no GPU work: every description
    assert _meta().used_device_names([4]) == ("device 4",)


@pytest.fixture(scope="module")
def qwen() -> str:
    return str(corpus_path(QWEN_MI300))


@pytest.mark.parametrize("command", ["analyze", "advise", "summary", "kernels"])
def test_every_command_names_the_mi300(cli, qwen: str, command: str) -> None:
    result = cli(command, qwen, "--format", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    devices = data["trace"]["devices"] if "trace" in data and "devices" in data["trace"] else data["devices"]
    assert devices == [MI300]


def test_busy_table_and_terminal_name_the_mi300(cli, qwen: str) -> None:
    result = cli("analyze", qwen, "--width", "200")
    assert result.code == 0, result.err
    assert f"devices: {MI300}" in result.out and "none recorded" not in result.out


def test_efficiency_of_device_2_uses_the_mi300_peaks(cli, qwen: str) -> None:
    result = cli("efficiency", qwen, "--device", "2", "--format", "json")
    assert result.code == 0, result.err
    device = json.loads(result.out)["device"]
    assert device["name"] == MI300 and device["peaks"] == "AMD Instinct MI300X"
