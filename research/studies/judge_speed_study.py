"""Study: speed-ups of the accurate judge stage that must change no decision (issue 44 item 6).

``python -m research.studies.judge_speed_study PAIRS.jsonl [PAIRS.jsonl ...]``

In one process, on the pairs of the files (as ``memtend eval-judge`` reads them), the shipped
cascade judges every pair twice per round, two rounds, alternating:
- before: onnxruntime sessions whose threads spin between runs (onnxruntime's default), bge-small
  run in batches of 32 in the order given (each padded to its longest text);
- after: the shipped sessions (threads sleep between runs: ``bge.session``) and bge batches of
  texts sorted by length (``bge.TokenEncoder.encode``).
The e5 vectors are made once up front and given to both (e5 is unchanged here), so the time is
that of the cheap features, bge-small and the cross-encoders. Prints per variant: ms per pair of
the accurate stage, ms per bge text and per cross-encoder order, and the count of pairs whose label,
review mark or probability differs (must be 0). Changes nothing.
"""

from __future__ import annotations

import argparse
import os
import time
import zipfile
from pathlib import Path

import numpy as np

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.evaluation import read_pairs
from mem_assets.dedup.offline_judge_features import PairFeaturizer
from mem_resources import bge
from mem_resources.embedder import e5_embed, normalize_rows, wordllama_embed
from mem_resources.settings import DEFAULT_MODELS_DIR, load_settings


def spinning_session(model: bytes | Path):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model if isinstance(model, bytes) else str(model), options,
                                        providers=["CPUExecutionProvider"])


class BeforeEncoder(bge.TokenEncoder):
    """bge-small as it ran before: spinning threads, batches in the order given."""

    def __init__(self, jar: Path, model: bge.ModelJar) -> None:
        with zipfile.ZipFile(jar) as archive:
            self._session = spinning_session(archive.read(f"{model.stem}.onnx"))
        self._tokenizer = bge.tokenizer(jar, model)

    def encode(self, texts: list[str]) -> list[bge.TokenStates]:
        out = []
        for start in range(0, len(texts), 32):
            encoded = self._tokenizer.encode_batch(texts[start:start + 32])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                              "token_type_ids": np.zeros_like(ids)})[0]
            for e, states, on in zip(encoded, hidden, mask, strict=True):
                keep = [i for i, (token, used) in enumerate(zip(e.tokens, on, strict=True))
                        if used and token not in ("[CLS]", "[SEP]")
                        and not bge._PUNCTUATION.fullmatch(token.removeprefix("##"))]
                tokens = states[keep] if keep else states[:1]
                out.append(bge.TokenStates(normalize_rows(states[0]), normalize_rows(tokens)))
        return out


class Timed:
    def __init__(self, inner, clock: dict, key: str) -> None:
        self.inner, self.clock, self.key = inner, clock, key

    def __call__(self, *args):
        start = time.perf_counter()
        try:
            return self.inner(*args)
        finally:
            self.clock[self.key] += time.perf_counter() - start


def variant(name: str, models_dir: Path, known: dict[str, np.ndarray], clock: dict):
    model = judge_model.load()
    encoders = {}
    crosses = {}
    for language in ("en", "zh"):
        jar = bge.existing_jar(models_dir, language)
        if name == "before":
            encoders[language] = BeforeEncoder(jar, bge.JARS[language])
            crosses[language] = cross_encoder.CrossEncoder(cross_encoder.MODEL_FILES[language], jar, language)
            crosses[language]._session = spinning_session(cross_encoder.MODEL_FILES[language])
        else:
            encoders[language] = bge.TokenEncoder(jar, bge.JARS[language])
            crosses[language] = cross_encoder.CrossEncoder(cross_encoder.MODEL_FILES[language], jar, language)

    class Enc:
        def __init__(self, language):
            self.language = language

        def encode(self, texts):
            return Timed(encoders[self.language].encode, clock, "bge")(texts)

    return PairFeaturizer(wordllama_embed, e5_embed, known, aligned=Enc,
                          cross={language: Timed(crosses[language].probabilities, clock, "ce")
                                 for language in model.cross_encoders})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, nargs="+")
    args = parser.parse_args()
    models_dir = load_settings().models_dir or DEFAULT_MODELS_DIR
    pairs = [(r["a"], r["b"]) for path in args.pairs for r in read_pairs(path)]
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    known = dict(zip(texts, e5_embed(texts), strict=True))
    gate = judge_model.gate("accurate", cascade=True)
    reference = None
    for round_ in (1, 2):
        for name in ("before", "after"):
            clock = {"bge": 0.0, "ce": 0.0}
            featurizer = variant(name, models_dir, known, clock)
            start = time.perf_counter()
            decided = judge_model.predict(pairs, judge_model.load(), featurizer, gate, band={"redundant": 0.15, "contradictory": 0.15})
            seconds = time.perf_counter() - start
            accurate = sum(d.stage == "accurate" for d in decided)
            texts_bge = len(featurizer._states)
            orders = featurizer.cross_encoded
            key = [(d.label, d.near, round(d.probability, 6)) for d in decided]
            reference = reference or key
            differing = sum(x != y for x, y in zip(key, reference, strict=True))
            labels = sum(x[0] != y[0] for x, y in zip(key, reference, strict=True))
            print(f"round {round_} {name}: {len(pairs)} pairs, {accurate} at the accurate stage, {seconds:.1f} s "
                  f"(e5 given); bge {1000 * clock['bge'] / max(texts_bge, 1):.2f} ms/text ({texts_bge}), "
                  f"cross-encoder {1000 * clock['ce'] / max(orders, 1):.2f} ms/order ({orders}); "
                  f"{1000 * (clock['bge'] + clock['ce']) / max(accurate, 1):.2f} ms bge+ce per accurate pair; "
                  f"differing labels {labels}, differing label/near/P {differing}; load {os.getloadavg()[0]:.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
