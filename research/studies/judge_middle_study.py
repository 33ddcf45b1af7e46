"""Study: a middle stage in the judge cascade (rule: research/studies/judge_middle_rule.md).

``python -m research.studies.judge_middle_study oof``      out-of-fold probabilities of the accurate,
                                          middle and fast recipes on train.jsonl (``judge_gate_study.oof``,
                                          the same folds), to /tmp/judge_middle_oof.npz
"""

from __future__ import annotations

import sys
from pathlib import Path

from research.studies import judge_gate_study as gate_study

OOF = Path("/tmp/judge_middle_oof.npz")


def oof() -> None:
    gate_study.OOF = OOF
    gate_study.oof(middle=True)


if __name__ == "__main__":
    {"oof": oof}[sys.argv[1]]()
