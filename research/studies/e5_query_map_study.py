"""The e5 ``query:`` vector from the passage vector by a fixed linear map (rule:
e5_query_map_rule.md), scored through eval-topics' code path on the tuning and unseen topic sets.

    python -m research.studies.e5_query_map_study fit      # writes the map the product loads
    python -m research.studies.e5_query_map_study score [--cache /tmp/e5once]

``fit`` embeds the training texts (judge train.jsonl, topic_training) with both e5 prefixes and
writes the map to the cache folder; ``score`` compares the kept vector's e5 slot
as the true ``query:`` vector (``today``) and as the mapped one (``m``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from mem_assets.reorg.evaluation import read_items
from mem_resources.embedder import e5_embed, e5_query_embed, normalize_rows
from research.studies.e5_once_study import TUNING, kept, parts, score

ROOT = Path(__file__).resolve().parents[2]
EVAL = ROOT / "research/data/eval"
UNSEEN = {**{f"fresh{n}": f"fresh{n}/topics.jsonl" for n in range(5, 12)},
          "locomo_heldout": "locomo/topics_heldout.jsonl"}
ALPHA = 1e-3
MAP_FILE = "e5-query-map-v1.npz"


def e5_query_from_passage(passage: np.ndarray, cache: Path) -> np.ndarray:
    """Unit ``query:`` vectors estimated from unit passage vectors by the fitted map."""
    with np.load(cache / MAP_FILE) as data:
        return normalize_rows(np.asarray(passage, dtype=np.float32) @ data["weight"] + data["bias"])


def training_texts() -> list[str]:
    texts: dict[str, None] = {}
    for line in (ROOT / "research/data/judge/train.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        texts.update(dict.fromkeys((row["a"], row["b"])))
    for file in sorted((ROOT / "research/data/topic_training").glob("*.jsonl")):
        for line in file.read_text(encoding="utf-8").splitlines():
            texts[json.loads(line)["text"]] = None
    return list(texts)


def fit(passage: np.ndarray, query: np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Ridge least squares ``query ≈ passage @ weight + bias`` (the bias unpenalised)."""
    mean_p, mean_q = passage.mean(axis=0), query.mean(axis=0)
    centred_p, centred_q = passage - mean_p, query - mean_q
    weight = np.linalg.solve(centred_p.T @ centred_p + alpha * len(passage) * np.eye(passage.shape[1]),
                             centred_p.T @ centred_q)
    return weight.astype(np.float32), (mean_q - mean_p @ weight).astype(np.float32)


def command_fit(cache: Path) -> None:
    texts = training_texts()
    file = cache / "map_training.npz"
    if not file.exists():
        np.savez(file, passage=normalize_rows(e5_embed(texts)), query=e5_query_embed(texts))
    data = np.load(file)
    weight, bias = fit(data["passage"], data["query"])
    mapped = normalize_rows(data["passage"] @ weight + bias)
    print(f"fit on {len(texts)} texts: in-sample cosine mean {float((mapped * data['query']).sum(1).mean()):.4f}")
    np.savez(cache / MAP_FILE, weight=weight, bias=bias)
    print("wrote", cache / MAP_FILE)


def command_score(cache: Path) -> None:
    out: dict[str, dict] = {}
    for group, sets in (("tuning", TUNING), ("unseen", UNSEEN)):
        rows: dict[str, dict] = {}
        for name, path in sets.items():
            items = read_items(EVAL / path)
            texts = [i.text for i in items]
            data = parts(name, texts, cache)
            data["mapped"] = e5_query_from_passage(data["passage"], cache)
            cosine = (data["mapped"] * data["query"]).sum(1)
            wl = dict(zip(texts, data["wl"], strict=True))
            today = score(items, wl, kept(data, "query", texts), _cross())
            mapped = score(items, wl, kept(data, "mapped", texts), _cross())
            rows[name] = {"items": len(items), "cosine_mean": round(float(cosine.mean()), 4),
                          "cosine_min": round(float(cosine.min()), 4), "today": today, "m": mapped}
            print(group, name, json.dumps(rows[name]), flush=True)
        out[group] = {"sets": rows, **{design: {k: round(float(np.mean([r[design][k] for r in rows.values()])), 4)
                                                for k in ("purity", "placed")} for design in ("today", "m")}}
        print(group, "mean", json.dumps({d: out[group][d] for d in ("today", "m")}), flush=True)
    tune, unseen = out["tuning"], out["unseen"]

    def worst(group: dict) -> float:
        return min(r["m"]["purity"] - r["today"]["purity"] for r in group["sets"].values())

    checks = {
        "tuning": tune["m"]["purity"] >= tune["today"]["purity"] - 0.005
        and tune["m"]["placed"] >= tune["today"]["placed"] - 0.001 and worst(tune) >= -0.02,
        "unseen": unseen["m"]["purity"] >= unseen["today"]["purity"] - 0.003
        and unseen["m"]["placed"] >= unseen["today"]["placed"] - 0.002 and worst(unseen) >= -0.01,
    }
    out["checks"] = checks
    (cache / "query_map_study.json").write_text(json.dumps(out, indent=1))
    print("checks", json.dumps(checks), "worst tuning", round(worst(tune), 4), "worst unseen", round(worst(unseen), 4))


def _cross():
    from mem_assets.reorg.placement_thresholds import CROSS_PARAMS

    return CROSS_PARAMS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("fit", "score"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/e5once"))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    (command_fit if args.command == "fit" else command_score)(args.cache)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
