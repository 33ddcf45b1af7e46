"""The judge's cross-encoders: bge-small-zh-v1.5 and bge-small-en-v1.5 fine-tuned to read
"[CLS] older [SEP] newer [SEP]" as contradictory / independent / redundant, one per pair language.

A bi-encoder compares two finished sentence vectors; a cross-encoder lets every word of one text
attend to every word of the other, which is what "用户是成都人" / "用户的老家在四川成都" needs.
Its three probabilities are columns of the accurate judge (``CROSS_FEATURE_NAMES``), not a judge
of its own: alone it ranks unseen Chinese pairs worse than the feature model, stacked it adds to
it (docs/dedup.md). The English one also learned real-conversation pairs: two true observations
of one speaker that restate an attitude with another detail are not the same fact. Trained by
``cross_encoder_training`` (the ``training`` extra), shipped as int8 ONNX files next to the judge's
trees and run by onnxruntime; each tokenizer is the one inside the bge jar ``make setup`` fetched.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mem_resources import bge, model_passes

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_FILES: dict[bge.Language, Path] = {
    "zh": Path(__file__).parent / "models" / "judge-v9-zh-cross-encoder.onnx",
    "en": Path(__file__).parent / "models" / "judge-v13-en-cross-encoder.onnx",
}
INPUTS = bge.INPUTS
MAX_TOKENS = 128


def tokenizer(jar: Path, language: bge.Language = "zh") -> Tokenizer:
    """The bge jar's tokenizer, pairs truncated to ``MAX_TOKENS`` and padded per batch."""
    return bge.tokenizer(jar, bge.JARS[language], MAX_TOKENS)


class CrossEncoder:
    """Probabilities of (older, newer) pairs, each pair run once per process and on its own: the
    int8 model quantizes activations with a scale taken over the whole input, so in a batch a
    pair's probabilities would depend on its neighbours (by up to 0.11). One input a run, so one
    intra-op thread (``bge.session``), and pairs run side by side on the process's cores
    (``bge.run_each``)."""

    def __init__(self, model: Path, jar: Path, language: bge.Language) -> None:
        self._session = model_passes.CountedSession(bge.session(model, threads=1), model.stem)
        self._tokenizer = tokenizer(jar, language)
        self._known: dict[tuple[str, str], np.ndarray] = {}

    def _run(self, pair: tuple[str, str]) -> np.ndarray:
        return self._session.run(None, bge.one_input(self._tokenizer.encode(*pair)))[0][0].astype(np.float64)

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        new = [pair for pair in dict.fromkeys(pairs) if pair not in self._known]
        self._known.update(zip(new, bge.run_each(self._run, new), strict=True))
        return np.array([self._known[p] for p in pairs]).reshape(len(pairs), 3)


@cache
def load(models_dir: Path, language: bge.Language) -> CrossEncoder:
    """The shipped cross-encoder of ``language``, loaded once per process (its tokenizer from the
    bge jar)."""
    return CrossEncoder(MODEL_FILES[language], bge.existing_jar(models_dir, language), language)


@cache
def sha256(language: bge.Language) -> str:
    return bge.file_sha256(MODEL_FILES[language])
