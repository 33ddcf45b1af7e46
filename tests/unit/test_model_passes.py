"""The process-wide model-pass counter: what a decorated function or a counted session adds, what
a step reports since its snapshot, and the round trip through asset metadata."""

from __future__ import annotations

import numpy as np

from mem_resources import model_passes
from mem_resources.model_passes import CountedSession, Passes


class _Session:
    providers = ("CPUExecutionProvider",)

    def run(self, outputs: object, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.zeros((len(feed["input_ids"]), 3))]


def test_a_counted_function_adds_its_items_and_seconds_and_a_snapshot_sees_only_what_came_after():
    @model_passes.counted("unit-test texts")
    def embed(texts: list[str]) -> list[int]:
        return [len(t) for t in texts]

    @model_passes.counted(lambda self, rows: f"unit-test {self} rows", items=1)
    def score(self: str, rows: np.ndarray) -> np.ndarray:
        return rows.sum(axis=1)

    embed(["a", "b"])
    start = model_passes.snapshot()
    embed(["c", "d", "e"])
    score("trees", np.ones((4, 2)))
    moved = model_passes.since(start)
    assert {m: c.items for m, c in moved.items()} == {"unit-test texts": 3, "unit-test trees rows": 4}
    assert all(c.seconds >= 0 for c in moved.values())
    assert model_passes.since(model_passes.snapshot()) == {}


def test_a_counted_session_counts_the_rows_of_its_first_input_and_passes_other_attributes_through():
    session = CountedSession(_Session(), "unit-test encoder")
    start = model_passes.snapshot()
    session.run(None, {"input_ids": np.zeros((5, 7)), "attention_mask": np.zeros((5, 7))})
    session.run(None, {"input_ids": np.zeros((1, 7))})
    assert model_passes.since(start)["unit-test encoder"].items == 6
    assert session.providers == ("CPUExecutionProvider",)


def test_step_metadata_round_trips_and_sums_per_model():
    start = model_passes.snapshot()
    model_passes.add("unit-test a", 10, 0.5)
    model_passes.add("unit-test b", 2, 0.25)
    read = model_passes.from_metadata(model_passes.metadata(start))
    assert read == {"unit-test a": Passes(10, 0.5), "unit-test b": Passes(2, 0.25)}
    assert model_passes.from_metadata({"pairs": 3}) == {}
    summed = model_passes.total(read, {"unit-test a": Passes(1, 0.5)})
    assert summed == {"unit-test a": Passes(11, 1.0), "unit-test b": Passes(2, 0.25)}
