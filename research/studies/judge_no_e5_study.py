"""judge-v13's recipe with and without its four e5 columns, on judge-v13's own training file
(rule: judge_no_e5_rule.md).

    python -m research.studies.judge_no_e5_study run A|C [--cache DIR]   # one recipe (a process each)
    python -m research.studies.judge_no_e5_study report [--cache DIR]
    python -m research.studies.judge_no_e5_study export --out PATH [--cache DIR]

``A``: judge-v13's recipe (A′ of the rule); ``B``: its e5 columns from ``query:`` vectors (B′, the
rule's amendment); ``C``: without ``DEEP_FEATURE_NAMES`` (C′, refused at screening).
Feature rows come from judge_query_v13_study's cached passage features of today's file (the same
featurizer, the 6,022 older rows selected), C′'s with the e5 columns cut; easy negatives are made
by each recipe's own featurizer. judge_trees' functions throughout; the held-out files are never
read here.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
from pathlib import Path

import numpy as np

from mem_assets.dedup.offline_judge_features import DEEP_FEATURE_NAMES, FEATURE_NAMES, PairFeaturizer
from mem_resources import bge
from mem_resources.embedder import e5_embed, e5_query_embed, wordllama_embed
from mem_resources.settings import load_settings
from research.studies.judge_query_v13_study import _cached, log, train_report
from research.training import judge_trees as jt

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = Path("/tmp/judge_no_e5")
TODAY_FEATURES = {"A": Path("/tmp/judge_query_v13_cache/passage/features.pkl"),
                  "B": Path("/tmp/judge_query_v13_cache/query/features.pkl"),
                  "C": Path("/tmp/judge_query_v13_cache/passage/features.pkl")}
DEEP_EMBED = {"A": e5_embed, "B": e5_query_embed, "C": None}
V13_FILE_COMMIT = "14d165c^"
DEEP = slice(len(FEATURE_NAMES), len(FEATURE_NAMES) + len(DEEP_FEATURE_NAMES))


def v13_rows() -> list[dict]:
    text = subprocess.run(["git", "show", f"{V13_FILE_COMMIT}:research/data/judge/train.jsonl"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class Recipe:
    def __init__(self, name: str, cache: Path) -> None:
        self.name, self.cache = name, cache / name
        self.cache.mkdir(parents=True, exist_ok=True)
        models_dir = load_settings().models_dir
        self.rows = v13_rows()
        self.truth = np.array([r["label"] for r in self.rows])
        self.featurizer = PairFeaturizer(wordllama_embed, DEEP_EMBED[name],
                                         aligned=lambda language: bge.encoder(models_dir, language),
                                         cross=jt.out_of_fold_cross(models_dir))
        self._features: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def features(self) -> tuple[np.ndarray, np.ndarray]:
        if self._features is None:
            self._features = _cached(self.cache / "features.pkl", self._select)
        return self._features

    def _select(self) -> tuple[np.ndarray, np.ndarray]:
        today = jt.read_pairs(jt.TRAIN_FILE)
        features, swapped = pickle.loads(TODAY_FEATURES[self.name].read_bytes())
        at = {(r["a"], r["b"], r["label"], r["group"]): i for i, r in enumerate(today)}
        index = [at[(r["a"], r["b"], r["label"], r["group"])] for r in self.rows]
        features, swapped = features[index], swapped[index]
        if self.name == "C":
            keep = np.r_[0:DEEP.start, DEEP.stop:features.shape[1]]
            features, swapped = features[:, keep], swapped[:, keep]
        if features.shape[1] != self.featurizer.width:
            raise RuntimeError(f"{features.shape[1]} columns, the featurizer makes {self.featurizer.width}")
        return features, swapped

    def shuffle(self, seed: int) -> np.ndarray:
        features, swapped = self.features
        return _cached(self.cache / f"shuffle{seed}.pkl", lambda: jt.cross_validate(
            self.rows, features, swapped, self.featurizer, jt.PARAMS["accurate"], (seed,))[1])[0]

    def final(self):
        features, swapped = self.features
        model = _cached(self.cache / "final.pkl", lambda: jt._fit(
            features, swapped, self.truth, jt.easy_negatives(self.rows, self.featurizer, 0), jt.PARAMS["accurate"]))
        real = jt.read_pairs(jt.REAL_TRAIN_FILE)
        probabilities, chinese = _cached(self.cache / "real.pkl",
                                         lambda: jt.pipeline_probabilities(model, real, self.featurizer))
        return model, np.array([r["label"] for r in real]), probabilities, chinese

    def has_all(self) -> bool:
        return all((self.cache / name).exists() for name in
                   ("final.pkl", "real.pkl", *(f"shuffle{s}.pkl" for s in jt.SHUFFLES)))

    def run(self) -> None:
        log(f"{self.name}: features {self.features[0].shape}")
        for seed in jt.SHUFFLES:
            log(f"{self.name}: shuffle {seed}")
            self.shuffle(seed)
        log(f"{self.name}: final fit")
        self.final()
        log(f"{self.name}: done")

    def evaluate(self) -> dict:
        return train_report(self.rows, self.features[0], [self.shuffle(seed) for seed in jt.SHUFFLES], self.final())


def means(report: dict) -> dict[str, float]:
    runs = report["runs"]
    return {"redundant_f1": round(float(np.mean([r["all"]["redundant"]["f1"] for r in runs])), 4),
            "contradictory_f1": round(float(np.mean([r["all"]["contradictory"]["f1"] for r in runs])), 4),
            "wrong_percent": round(float(np.mean([r["all"]["wrong_percent"] for r in runs])), 4)}


def verdict(c: dict, a: dict) -> list[str]:
    cm, am = means(c), means(a)
    failed = [f"{key} {cm[key]:.4f} < {am[key]:.4f} - 0.005" for key in ("redundant_f1", "contradictory_f1")
              if cm[key] < am[key] - 0.005 - 1e-9]
    if cm["wrong_percent"] > am["wrong_percent"] + 0.1 + 1e-9:
        failed.append(f"wrong {cm['wrong_percent']:.3f} % > {am['wrong_percent']:.3f} + 0.1")
    c_real, a_real = c["real_conversation_train"], a["real_conversation_train"]
    if c_real["wrong_merges"] + c_real["wrong_supersedes"] > a_real["wrong_merges"] + a_real["wrong_supersedes"]:
        failed.append("real-conversation wrong merges + supersedes above A′'s")
    if c_real["redundant_found"] < a_real["redundant_found"] - 2:
        failed.append("real-conversation repeats found below A′'s - 2")
    return failed


def report(cache: Path) -> None:
    v13 = json.loads((ROOT / "mem_assets/dedup/models/judge-v13.json").read_text("utf-8"))
    reports = {name: Recipe(name, cache).evaluate() for name in ("A", "C")}
    for name, result in reports.items():
        print(json.dumps({"recipe": name, "thresholds": result["thresholds"], "cv_thresholds": result["cv_thresholds"],
                          "means": means(result), "runs": [r["all"] for r in result["runs"]],
                          "by_language": [{k: r[k] for k in ("en", "zh")} for r in result["runs"]],
                          "real_conversation_train": result["real_conversation_train"]}, indent=1))
    print(json.dumps({"judge-v13.json": {"thresholds": v13["thresholds"], "means": means(v13["training"]),
                                         "real_conversation_train": v13["training"]["real_conversation_train"]}}))
    print("A′ reproduces judge-v13.json's thresholds:", reports["A"]["thresholds"] == v13["thresholds"])
    (cache / "report.json").write_text(json.dumps(reports), "utf-8")
    failed = verdict(reports["C"], reports["A"])
    log("rule: " + ("C′ fails: " + "; ".join(failed) if failed else "C′ passes"))


def export(cache: Path, out: Path) -> None:
    """C′'s final fit as judge_trees.train writes it (checked against scikit-learn first)."""
    from mem_assets.dedup.offline_judge_model import model_from_json

    result = json.loads((cache / "report.json").read_text("utf-8"))["C"]
    thresholds = result.pop("thresholds")
    recipe = Recipe("C", cache)
    model = recipe.final()[0]
    text = jt.export(model, "accurate", thresholds, {"training": result})
    exported = model_from_json(text, "check")
    features = recipe.features[0]
    seen = features.astype(np.float32).astype(np.float64)
    if not np.allclose(exported.probabilities(seen), model.predict_proba(features), atol=1e-6):
        raise RuntimeError("exported trees disagree with scikit-learn's probabilities")
    out.write_text(text, "utf-8")
    log(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("run", "report", "export"))
    parser.add_argument("recipe", nargs="?", choices=("A", "B", "C"))
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.command == "run":
        Recipe(args.recipe, args.cache).run()
    elif args.command == "report":
        report(args.cache)
    else:
        export(args.cache, args.out)


if __name__ == "__main__":
    main()
