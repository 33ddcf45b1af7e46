"""Study: onnxruntime session options of the models run one input at a time (rule:
bge_int8_rule.md, "Other savings"; issue 44 item 6).

``python -m research.studies.session_options_study PAIRS.jsonl [...] [--texts N]``

The topic encoders (en, zh), the judge's cross-encoders (en, zh) and int8 bge-small (one text a
run) each run on the same sample of texts (cross-encoders: on pairs of them) under three session
variants, alternating, two rounds: onnxruntime's default (threads spin between runs: the topic
encoders before this change), threads that sleep (``bge.session``; the cross-encoders and bge
before this change), and sleeping with one intra-op thread (shipped for the cross-encoders and
topic encoders). Prints ms per input and load, and whether each variant's outputs are bit for bit
those of the default. Changes nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup.evaluation import read_pairs
from mem_assets.reorg import topic_encoder
from mem_resources import bge
from mem_resources.settings import DEFAULT_MODELS_DIR, load_settings


def make_session(model: bytes | Path, variant: str):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    if variant != "spinning (default)":
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if variant == "sleeping, 1 thread":
        options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(model if isinstance(model, bytes) else str(model), options,
                                        providers=["CPUExecutionProvider"])


VARIANTS = ("spinning (default)", "sleeping, default threads", "sleeping, 1 thread")


def runners(models_dir: Path, variant: str) -> dict[str, Callable[[list], np.ndarray]]:
    out: dict[str, Callable[[list], np.ndarray]] = {}
    for language in ("en", "zh"):
        encoder = topic_encoder.TopicEncoder(topic_encoder.ENCODERS[language])
        encoder._session = make_session(topic_encoder.ENCODERS[language].file, variant)
        out[f"topic encoder {language}"] = encoder.embed
        scorer = cross_encoder.CrossEncoder(cross_encoder.MODEL_FILES[language],
                                            bge.existing_jar(models_dir, language), language)
        scorer._session = make_session(cross_encoder.MODEL_FILES[language], variant)
        out[f"cross-encoder {language}"] = scorer.probabilities
        jar = bge.existing_jar(models_dir, language)
        states = bge.TokenEncoder(jar, bge.JARS[language])
        with __import__("zipfile").ZipFile(jar) as archive:
            states._session = make_session(archive.read(f"{bge.JARS[language].stem}.onnx"), variant)
        out[f"bge {language}"] = lambda texts, s=states: np.concatenate([np.concatenate(
            [t.sentence[None], t.tokens]) for t in s.encode(texts)])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, nargs="+")
    parser.add_argument("--texts", type=int, default=200, help="texts (and pairs) per language")
    args = parser.parse_args()
    models_dir = load_settings().models_dir or DEFAULT_MODELS_DIR
    rng = random.Random(0)
    rows = [r for path in args.pairs for r in read_pairs(path)]
    pairs = {language: rng.sample([(r["a"], r["b"]) for r in rows if bge.pair_language(r["a"], r["b"]) == language],
                                  args.texts) for language in ("en", "zh")}
    inputs = {language: sorted({t for pair in sample for t in pair})[:args.texts] for language, sample in pairs.items()}
    built = {variant: runners(models_dir, variant) for variant in VARIANTS}
    reference: dict[str, np.ndarray] = {}
    for round_ in (1, 2):
        for name in built[VARIANTS[0]]:
            language = name[-2:]
            feed = pairs[language] if name.startswith("cross") else inputs[language]
            for variant in VARIANTS:
                run = built[variant][name]
                if name.startswith("cross"):
                    run.__self__._known.clear()
                start = time.perf_counter()
                out = run(feed)
                ms = 1000 * (time.perf_counter() - start) / len(feed)
                same = np.array_equal(reference.setdefault(name, out), out)
                print(f"round {round_} {name} {variant}: {ms:.2f} ms per {'pair' if name.startswith('cross') else 'text'}, "
                      f"bit-identical {same}, load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
