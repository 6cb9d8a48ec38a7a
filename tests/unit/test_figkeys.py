"""Per-device figure keys: built, recognised and ordered in one place (`ladder.core.figkeys`)."""

from __future__ import annotations

import pytest

from ladder.core import figkeys
from ladder.core.figkeys import AVG_SM_UTIL, AVG_UTIL, MAX_MEM


@pytest.mark.parametrize(
    ("name", "stem", "index"),
    [
        ("max_mem0", MAX_MEM, 0),
        ("max_mem12", MAX_MEM, 12),
        ("avg_util1", AVG_UTIL, 1),
        ("avg_sm_util3", AVG_SM_UTIL, 3),
        ("max_mem", MAX_MEM, None),  # no index
        ("max_mem_mb", MAX_MEM, None),  # another figure that starts the same
        ("min_avg_util", AVG_UTIL, None),
        ("avg_sm_util0", AVG_UTIL, None),  # the SM figure is not the util figure
        ("max_mem١", MAX_MEM, None),  # a non-ASCII digit is no index
    ],
    ids=lambda v: str(v),
)
def test_index_of_reads_only_a_stem_followed_by_digits(name: str, stem: str, index: int | None) -> None:
    assert figkeys.index_of(name, stem) == index


def test_a_built_key_reads_back_as_its_index() -> None:
    assert [figkeys.index_of(figkeys.key(MAX_MEM, i), MAX_MEM) for i in (0, 7, 10)] == [0, 7, 10]


def test_keys_come_in_device_order_not_text_order() -> None:
    row = {"max_mem10": "1", "max_mem2": "2", "max_mem0": "3", "max_mem_mb": "4", "avg_util1": "5"}
    assert figkeys.keys(row, MAX_MEM) == ["max_mem0", "max_mem2", "max_mem10"]
    assert figkeys.values(row, MAX_MEM) == ["3", "2", "1"]
    assert figkeys.values(row, AVG_UTIL) == ["5"]
