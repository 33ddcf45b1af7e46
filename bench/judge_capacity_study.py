"""Study: does judge-v7's recipe gain from more capacity (deeper trees, more stages)?

``python bench/judge_capacity_study.py oof NAME SEEDS``  out-of-fold probabilities of candidate NAME
    (``CANDIDATES``) in training.py's 5 group folds per shuffle, same easy negatives and seeds; then,
    with shuffle 0, a fit on all training pairs.
``python bench/judge_capacity_study.py report SEEDS``  judge_query_study's report for judge-v7 (its
    out-of-fold files written by ``judge_query_study.py oof v7``) and each candidate.

Training data only: the held-out files are never read.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_query_study import COLUMNS, oof, report

from mem_assets.dedup import training

CANDIDATES = {"D1": training.PARAMS["accurate"] | {"n_estimators": 600},
              "D2": training.PARAMS["accurate"] | {"max_depth": 5}}


if __name__ == "__main__":
    if sys.argv[1] == "oof":
        oof(sys.argv[2], [int(s) for s in sys.argv[3].split(",")], COLUMNS["v7"], CANDIDATES[sys.argv[2]])
    else:
        report([int(s) for s in sys.argv[2].split(",")], dict.fromkeys(("v7", *CANDIDATES), COLUMNS["v7"]))
