"""Study: what the e5 gate's bound costs the accurate judge (moved out of bench/judge_bench.py,
which measures the shipped judge's speed only). On labeled pairs as ``memtend eval-judge`` reads
them (e.g. research/data/judge/locomo/train.jsonl: real conversations, where the gate fires far
more than on the bench's template texts), the accurate judge behind the shipped gate and behind
``--baseline-bound``, cold each time; two rounds, since the first pass of a process pays the ONNX
sessions' warm-up. Prints figures; changes nothing.

    python -m research.studies.judge_gate_cost_study research/data/judge/locomo/train.jsonl [--baseline-bound 0.19]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from bench.judge_bench import cold
from bench.measure import measured
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.evaluation import read_pairs


def gate_cost(path: Path, baseline_bound: float) -> None:
    pairs = [(r["a"], r["b"]) for r in read_pairs(path)]
    shipped = judge_model.gate()
    assert shipped is not None
    seconds = {}
    for round_ in (1, 2):
        for gate in (dataclasses.replace(shipped, below=baseline_bound), shipped):
            cold()
            with measured() as total:
                decisions = judge_model.predict(pairs, judge_model.load("accurate"), gate=gate)
            seconds[gate.below] = total.seconds
            gated = sum(d.gated is not None for d in decisions)
            print(f"{total.line(f'round {round_}: accurate judge, gate at {gate.below} ({len(pairs)} pairs of {path.name})')}"
                  f"; {gated} gated, {1000 * total.seconds / len(pairs):.2f} ms/pair")
    print(f"  round 2, shipped gate / gate at {baseline_bound}: {seconds[shipped.below] / seconds[baseline_bound]:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, help="labeled pairs (JSONL of a, b, label)")
    parser.add_argument("--baseline-bound", type=float, default=0.19)
    args = parser.parse_args()
    gate_cost(args.pairs, args.baseline_bound)
