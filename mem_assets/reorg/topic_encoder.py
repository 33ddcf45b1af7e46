"""The topic encoders: bge-small fine-tuned so that memories of one theme lie close
(``topic_encoder_training``), one per language — English from bge-small-en-v1.5, Chinese from
bge-small-zh-v1.5 — each shipped as an int8 ONNX file with its tokenizer and run by onnxruntime.
A language's topics are placed in its encoder's space (``vectors.ENCODER_SPACES``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import numpy as np

from mem_resources import bge, model_passes

Language = Literal["en", "zh"]
MODELS = Path(__file__).parent / "models"
INPUTS = bge.INPUTS
MAX_TOKENS = 64


@dataclass(frozen=True)
class EncoderModel:
    """One shipped encoder. ``name`` tags stored vectors and centroids: bump it with a retrained
    model, so that those of the old one are made again; ``sha256`` is the file it stands for."""

    name: str
    sha256: str
    dimension: int
    heads: int

    @property
    def file(self) -> Path:
        return MODELS / f"{self.name}.onnx"

    @property
    def tokenizer(self) -> Path:
        return MODELS / f"{self.name}-tokenizer.json"


ENCODERS: dict[Language, EncoderModel] = {
    "en": EncoderModel("topic-encoder-v1", "fa91585dae98c632c2fc21b570ae5cf53eaea7351b603cfda1d6780f5258f7d8",
                       dimension=384, heads=12),
    "zh": EncoderModel("topic-encoder-zh-v1",
                       "7c896812f26cbf6575b2ffe41df2df4b54a4b9d8cf9b35c505b380d942aa15a4", dimension=512, heads=8),
}


class ModelChangedError(RuntimeError):
    pass


class TopicEncoder:
    """Unit vectors of texts, each text run on its own: the int8 model quantizes activations with
    a scale taken over the whole input, so in a batch a text's vector would depend on its
    neighbours. So its session has one intra-op thread, which sleeps between runs (``bge.session``):
    same vectors, bit for bit, and no core spun away from the next text on a shared machine."""

    def __init__(self, model: EncoderModel, file: Path | None = None, check: bool = True) -> None:
        from tokenizers import Tokenizer

        file = file or model.file
        if check and bge.file_sha256(file) != model.sha256:
            raise ModelChangedError(
                f"{file} is not the topic encoder {model.name} (sha256 {model.sha256[:12]}…): restore it "
                "(git checkout), or after retraining bump its name and sha256 in topic_encoder.ENCODERS so "
                "that vectors kept from the old model are made again")
        self.dimension = model.dimension
        self._session = model_passes.CountedSession(bge.session(file, threads=1), model.name)
        self._tokenizer = Tokenizer.from_file(str(model.tokenizer))
        self._tokenizer.enable_truncation(MAX_TOKENS)

    def _run(self, text: str) -> np.ndarray:
        return self._session.run(None, bge.one_input(self._tokenizer.encode(text)))[0][0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Each text on its own, side by side on the process's cores (``bge.run_each``)."""
        return np.array(bge.run_each(self._run, list(texts)), dtype=np.float32).reshape(len(texts), self.dimension)


@cache
def load(language: Language = "en") -> TopicEncoder:
    """A shipped topic encoder, loaded once per process."""
    return TopicEncoder(ENCODERS[language])


def topic_encoder_embed(texts: Sequence[str], language: Language = "en") -> np.ndarray:
    return load(language).embed(texts)
