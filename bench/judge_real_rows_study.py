"""judge-v10 study (bench/judge_v10_rule.md): the 640 real-conversation training pairs as training
rows (A: weight 1, B: weight 3) against judge-v9's recipe rerun (V9, real rows scored out of fold
but never learned from), each with the real-conversation threshold step for every pair or for
English pairs only. Not shipped: training.py at this commit has the candidates' code; the commit
after it reverts them.

``python bench/judge_real_rows_study.py run TAG WEIGHT USE_REAL`` (TAG A: ``A 1 1``, B: ``B 3 1``,
V9: ``V9 1 0``; ~35 min alone on two cores, ~75 min for the three side by side), then
``python bench/judge_real_rows_study.py report A B V9``. Out-of-fold probabilities are pickled
under ``bench/results/``. Training data only; the held-out files are never read.
"""

import json
import pickle
import sys
from pathlib import Path

import numpy as np

from mem_assets.dedup import training as T
from mem_resources.bge import _CJK
from mem_resources.settings import load_settings

CACHE = Path(__file__).parent / "results"


def run(tag: str, weight: float, use_real: bool) -> None:
    """training.train with the real rows learned from (or not), pickling its out-of-fold runs."""
    T.REAL_WEIGHT = weight
    original_cv, original_scores, original_step = T.cross_validate, T.cv_scores, T.real_conversation_threshold
    captured: dict = {}

    def cross_validate(rows, features, swapped, featurizer, params, real=None):
        if use_real:
            thresholds, runs = original_cv(rows, features, swapped, featurizer, params, real)
        else:
            thresholds, authored = original_cv([r for r, x in zip(rows, real, strict=True) if not x],
                                               features[~real], swapped[~real], featurizer, params, None)
            runs = []
            for part in authored:
                full = np.full((len(rows), 3), np.nan)
                full[~real] = part
                runs.append(full)
        captured.update(runs=runs, rows=rows, real=real)
        return thresholds, runs

    def cv_scores(rows, runs, thresholds, real):
        if use_real:
            return original_scores(rows, runs, thresholds, real)
        return original_scores([r for r, x in zip(rows, real, strict=True) if not x], [r[~real] for r in runs],
                               thresholds, np.zeros(int((~real).sum()), dtype=bool))

    T.cross_validate, T.cv_scores = cross_validate, cv_scores
    T.real_conversation_threshold = original_step if use_real else (lambda p, t, th: th)
    _, report = T.train(models_dir=load_settings().models_dir)
    CACHE.mkdir(exist_ok=True)
    (CACHE / f"judge-real-rows-{tag}.pkl").write_bytes(pickle.dumps({**captured, "report": report}))
    print(json.dumps(report["thresholds"]))


def figures(tag: str) -> dict:
    """Means over the shuffles, at the rule's thresholds, in both modes (see the rule)."""
    d = pickle.loads((CACHE / f"judge-real-rows-{tag}.pkl").read_bytes())
    rows, real, runs = d["rows"], d["real"], d["runs"]
    truth = np.array([r["label"] for r in rows])
    zh = np.array([bool(_CJK.search(r["a"]) and _CJK.search(r["b"])) for r in rows])
    authored, shuffles = ~real, len(runs)
    learned = not np.isnan(runs[0][real]).any()
    cv = T.choose_thresholds(np.vstack([r[authored] for r in runs]), np.tile(truth[authored], shuffles))
    raised = T.real_conversation_threshold(np.vstack([r[real] for r in runs]), np.tile(truth[real], shuffles),
                                           cv)["redundant"] if learned else 0.92
    out: dict = {"cv": cv, "raised": raised}
    for mode in ("all", "en"):
        redundant = np.where(zh & (mode == "en"), cv["redundant"], raised)
        authored_figures, real_figures = [], []
        for run in runs:
            predicted = T.apply_thresholds(run, redundant, cv["contradictory"])
            s = T._scores(truth[authored], predicted[authored])
            authored_figures.append((s["redundant"]["f1"], s["contradictory"]["f1"], s["wrong_percent"]))
            if learned:
                f = T.real_figures(truth[real], predicted[real])
                real_figures.append((f["wrong_merges"], f["wrong_supersedes"], f["redundant_found"], f["redundant_f1"]))
        out[mode] = {"hand-written R F1, C F1, wrong %": np.mean(authored_figures, axis=0).round(4).tolist(),
                     "real wrong merges, supersedes, found, R F1":
                         np.mean(real_figures, axis=0).round(3).tolist() if learned else "judge-v9's"}
    return out


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1")
    else:
        for name in sys.argv[2:]:
            print(name, json.dumps(figures(name)))
