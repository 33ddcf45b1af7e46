"""Step outputs round-trip through the table store exactly, without pickle."""

from __future__ import annotations

import zipfile
from datetime import UTC, datetime
from io import BytesIO

import numpy as np
import pandas as pd
import pytest

from mem_resources.table_io import dump_table, load_table


def test_tables_with_vectors_lists_timestamps_and_gaps_round_trip():
    frame = pd.DataFrame({
        "id": ["mem:1", "mem:2"],
        "embedding": [np.array([0.1, 0.2, 0.3], dtype=np.float32), np.array([1.0, 0.0, -0.5], dtype=np.float32)],
        "sources": [["mem:a", "mem:b"], ["mem:c"]],
        "score": [0.912345678901, 0.5],
        "exact": [True, False],
        "archived": [2.0, np.nan],
        "seen_at": [datetime(2026, 11, 30, 8, 0, tzinfo=UTC)] * 2,
    })
    back = load_table(dump_table(frame))
    assert list(back.columns) == list(frame.columns)
    assert back["embedding"][1].dtype == np.float32
    np.testing.assert_array_equal(np.stack(back["embedding"]), np.stack(frame["embedding"]))
    assert back["sources"].tolist() == [["mem:a", "mem:b"], ["mem:c"]]
    assert back["score"].tolist() == pytest.approx(frame["score"].tolist(), abs=1e-12)
    assert back["exact"].dtype == bool and np.isnan(back["archived"][1])
    assert back["seen_at"][0] == pd.Timestamp("2026-11-30T08:00:00Z")


def test_empty_tables_keep_their_columns_and_nothing_is_pickled():
    empty = pd.DataFrame(columns=["left_id", "right_id", "score"])
    assert list(load_table(dump_table(empty)).columns) == ["left_id", "right_id", "score"]
    data = dump_table(pd.DataFrame({"v": [np.zeros(2), np.ones(2)]}))
    with zipfile.ZipFile(BytesIO(data)) as archive:
        assert sorted(archive.namelist()) == ["attrs.json", "columns.json", "table.json", "v.npy"]
        np.load(BytesIO(archive.read("v.npy")), allow_pickle=False)


def test_vectors_of_different_lengths_round_trip():
    """Reorganization candidates: English rows carry the embedder's vector, Chinese rows e5's."""
    frame = pd.DataFrame({"id": ["en", "zh", "en2"],
                          "embedding": [np.arange(4, dtype=np.float32), np.arange(6, dtype=np.float32) / 7,
                                        np.ones(4, dtype=np.float32)]})
    back = load_table(dump_table(frame))
    assert [len(v) for v in back["embedding"]] == [4, 6, 4]
    for got, want in zip(back["embedding"], frame["embedding"], strict=True):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_counts_handed_to_the_next_step_survive_the_store():
    """A step's ``attrs`` (new nodes, judge calls) reach the step that loads its output."""
    frame = pd.DataFrame({"left_id": ["a"], "right_id": ["b"]})
    frame.attrs.update({"unchecked_nodes": np.int64(127), "judge_calls": 142})
    back = load_table(dump_table(frame))
    assert back.attrs == {"unchecked_nodes": 127, "judge_calls": 142}
    assert type(back.attrs["unchecked_nodes"]) is int
