"""The topic encoder: bge-small-en-v1.5 fine-tuned so that memories of one theme lie close
(``topic_encoder_training``), shipped as an int8 ONNX file with its tokenizer and run by
onnxruntime. English topics are placed in its space (``vectors.COMBINED_SPACE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from mem_resources import bge

MODELS = Path(__file__).parent / "models"
MODEL_FILE = MODELS / "topic-encoder-v1.onnx"
TOKENIZER_FILE = MODELS / "topic-encoder-v1-tokenizer.json"
#: Names the model in stored-vector keys and centroid tags: bump it with a retrained model, so that
#: kept vectors and centroids of the old one are made again.
NAME = "topic-encoder-v1"
#: The file ``NAME`` stands for; another file is refused rather than mixed with vectors kept from this one.
MODEL_SHA256 = "fa91585dae98c632c2fc21b570ae5cf53eaea7351b603cfda1d6780f5258f7d8"
DIMENSION = 384
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
MAX_TOKENS = 64


class ModelChangedError(RuntimeError):
    pass


class TopicEncoder:
    """Unit vectors of texts, each text run on its own: the int8 model quantizes activations with
    a scale taken over the whole input, so in a batch a text's vector would depend on its
    neighbours."""

    def __init__(self, model: Path = MODEL_FILE, tokenizer: Path = TOKENIZER_FILE,
                 expected_sha256: str | None = MODEL_SHA256) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        if expected_sha256 is not None and bge.file_sha256(model) != expected_sha256:
            raise ModelChangedError(
                f"{model} is not the topic encoder {NAME} (sha256 {expected_sha256[:12]}…): restore it "
                "(git checkout), or after retraining bump topic_encoder.NAME and MODEL_SHA256 so that "
                "vectors kept from the old model are made again")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(MAX_TOKENS)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            encoded = self._tokenizer.encode(text)
            feed = {name: np.array([getattr(encoded, field)], dtype=np.int64)
                    for name, field in zip(INPUTS, ("ids", "attention_mask", "type_ids"), strict=True)}
            out[row] = self._session.run(None, feed)[0][0]
        return out


@cache
def load() -> TopicEncoder:
    """The shipped topic encoder, loaded once per process."""
    return TopicEncoder()


def topic_encoder_embed(texts: Sequence[str]) -> np.ndarray:
    return load().embed(texts)
