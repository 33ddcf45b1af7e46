"""Topic encoder speed-ups that change no decision (issue 44 item 3): onnxruntime thread
settings, timed on tuning texts, with every vector compared bit for bit against the shipped
session's. (Batching is not among them: the int8 model quantizes activations with one scale over
the whole input, so a batched text's vector depends on its neighbours; a shorter sequence than
``MAX_TOKENS`` truncates texts, which changes vectors too.)

    python -m research.studies.topic_encoder_speed_study [--texts 300]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from mem_assets.reorg.evaluation import read_items
from mem_assets.reorg.topic_encoder import ENCODERS, TopicEncoder
from mem_assets.reorg.topic_space import language

ROOT = Path(__file__).resolve().parents[2]


def session(lang: str, threads: int | None, spinning: bool) -> TopicEncoder:
    encoder = TopicEncoder(ENCODERS[lang])  # type: ignore[index]
    if threads is None:
        return encoder
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    encoder._session = onnxruntime.InferenceSession(str(ENCODERS[lang].file), options,  # type: ignore[index]
                                                    providers=["CPUExecutionProvider"])
    return encoder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=300)
    args = parser.parse_args()
    items = read_items(ROOT / "research/data/eval/fresh/topics.jsonl")
    out = {}
    for lang in ("en", "zh"):
        texts = [i.text for i in items if language(i.text) == lang][:args.texts]
        shipped = session(lang, None, True)
        reference = shipped.embed(texts)
        for label, threads, spinning in (("shipped (default threads, spinning)", None, True),
                                         ("1 thread, no spinning", 1, False),
                                         ("2 threads, no spinning", 2, False)):
            encoder = session(lang, threads, spinning)
            encoder.embed(texts[:10])
            start = time.perf_counter()
            vectors = encoder.embed(texts)
            ms = (time.perf_counter() - start) * 1000 / len(texts)
            out[f"{lang}: {label}"] = {"ms_per_text": round(ms, 2),
                                       "identical": bool(np.array_equal(vectors, reference)),
                                       "max_abs_diff": float(np.abs(vectors - reference).max())}
            print(f"{lang}: {label}: {json.dumps(out[f'{lang}: {label}'])}", flush=True)


if __name__ == "__main__":
    main()
