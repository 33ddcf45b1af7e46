"""A fine-tuned bge-small-zh cross-encoder against judge-v8's recipe, on Chinese training pairs only.

Rule fixed before any figure: bench/judge_cross_encoder_rule.md. The encoder's weights are read
from the ONNX file inside the langchain4j jar that ``make setup`` fetched (the same model the judge's
aligned features run), into a plain torch BERT (``Encoder``) whose output matches onnxruntime's; a
linear head on ``[CLS]`` reads "[CLS] older [SEP] newer [SEP]" as redundant / contradictory /
independent. It is fine-tuned on 80 % of the Chinese groups of data/judge/train.jsonl and scored on
the other 20 %, next to judge-v8's recipe out of fold (training.py's folds; those models never saw
the rows either). Never given a held-out file.

torch and onnx are not project dependencies; install them beside the project to run this:

    .venv/bin/pip install 'torch>=2.5,<3' 'onnx>=1.16,<2'
    python bench/judge_cross_encoder_study.py --oof-cache /tmp/judge_v8_oof.pkl
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from sklearn.metrics import average_precision_score, precision_recall_curve
from sklearn.model_selection import GroupShuffleSplit
from tokenizers import Tokenizer

from mem_assets.dedup import training
from mem_assets.dedup.judge_model import featurizer, symmetrize
from mem_resources import bge
from mem_resources.settings import load_settings

CLASSES = training.CLASSES
HEADS = {"zh": 8, "en": 12}
EPOCHS, BATCH, LEARNING_RATE, MAX_TOKENS = 3, 16, 3e-5, 128


class Layer(torch.nn.Module):
    def __init__(self, hidden: int, inner: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value, self.out = (torch.nn.Linear(hidden, hidden) for _ in range(4))
        self.norm1, self.norm2 = torch.nn.LayerNorm(hidden, eps=1e-12), torch.nn.LayerNorm(hidden, eps=1e-12)
        self.up, self.down = torch.nn.Linear(hidden, inner), torch.nn.Linear(inner, hidden)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n, t, h = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(n, t, self.heads, h // self.heads).transpose(1, 2)

        attended = torch.nn.functional.scaled_dot_product_attention(
            split(self.query(x)), split(self.key(x)), split(self.value(x)), attn_mask=bias)
        x = self.norm1(x + self.out(attended.transpose(1, 2).reshape(n, t, h)))
        return self.norm2(x + self.down(torch.nn.functional.gelu(self.up(x))))


class Encoder(torch.nn.Module):
    """BERT as exported to the jar's ONNX (post-norm, erf GELU), last hidden states."""

    def __init__(self, weights: dict[str, np.ndarray], heads: int) -> None:
        super().__init__()
        vocab, hidden = weights["embeddings.word_embeddings.weight"].shape
        count = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))
        inner = weights["encoder.layer.0.intermediate.dense.bias"].shape[0]
        self.words = torch.nn.Embedding(vocab, hidden)
        self.positions = torch.nn.Embedding(weights["embeddings.position_embeddings.weight"].shape[0], hidden)
        self.types = torch.nn.Embedding(2, hidden)
        self.norm = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.layers = torch.nn.ModuleList(Layer(hidden, inner, heads) for _ in range(count))
        names = {"words": "embeddings.word_embeddings", "positions": "embeddings.position_embeddings",
                 "types": "embeddings.token_type_embeddings", "norm": "embeddings.LayerNorm"}
        parts = {"query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
                 "out": "attention.output.dense", "norm1": "attention.output.LayerNorm",
                 "up": "intermediate.dense", "down": "output.dense", "norm2": "output.LayerNorm"}
        names |= {f"layers.{i}.{ours}": f"encoder.layer.{i}.{theirs}" for i in range(count) for ours, theirs in parts.items()}
        state = {}
        for ours, theirs in names.items():
            for kind in ("weight", "bias"):
                if f"{theirs}.{kind}" in weights:
                    state[f"{ours}.{kind}"] = torch.tensor(weights[f"{theirs}.{kind}"].copy())
        self.load_state_dict(state)
        self.hidden = hidden

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        x = self.words(ids) + self.types(types) + self.positions(torch.arange(ids.shape[1]))[None]
        x = self.norm(x)
        bias = ((1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min)
        for layer in self.layers:
            x = layer(x, bias)
        return x


def read_jar(jar: Path, stem: str) -> tuple[bytes, str]:
    """The ONNX model and its tokenizer JSON, as bge.TokenEncoder reads them."""
    with zipfile.ZipFile(jar) as archive:
        return archive.read(f"{stem}.onnx"), archive.read(f"{stem}-tokenizer.json").decode("utf-8")


def onnx_weights(model_bytes: bytes) -> dict[str, np.ndarray]:
    """Named initializers; the exporter left MatMul weights anonymous, so they are named by the
    node that uses them (and transposed to torch's layout)."""
    model = onnx.load_from_string(model_bytes)
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weights = {k: v for k, v in arrays.items() if not k.startswith("onnx::")}
    for node in model.graph.node:
        used = [x for x in node.input if x in arrays and x.startswith("onnx::")]
        if node.op_type == "MatMul" and used:
            weights[node.name.strip("/").removesuffix("/MatMul").replace("/", ".") + ".weight"] = arrays[used[0]].T
    return weights


class CrossEncoder(torch.nn.Module):
    def __init__(self, encoder: Encoder) -> None:
        super().__init__()
        self.encoder, self.drop, self.head = encoder, torch.nn.Dropout(0.1), torch.nn.Linear(encoder.hidden, 3)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.encoder(ids, mask, types)[:, 0]))


def tokenizer(tokenizer_json: str) -> Tokenizer:
    tok = Tokenizer.from_str(tokenizer_json)
    tok.enable_truncation(MAX_TOKENS)
    tok.enable_padding()
    return tok


def encode(tok: Tokenizer, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids, attention mask and segment ids of "[CLS] older [SEP] newer [SEP]"."""
    e = tok.encode_batch(pairs)
    return (torch.tensor([x.ids for x in e]), torch.tensor([x.attention_mask for x in e]),
            torch.tensor([x.type_ids for x in e]))


def parity(encoder: Encoder, model_bytes: bytes, tok: Tokenizer) -> float:
    """Largest difference from onnxruntime's hidden states on two texts."""
    import onnxruntime

    session = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    encoded = tok.encode_batch(["用户不喜欢吃香菜", "用户讨厌香菜的味道，吃饭时总让老板别放。"])
    ids, mask = np.array([e.ids for e in encoded]), np.array([e.attention_mask for e in encoded])
    reference = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    encoder.eval()
    with torch.no_grad():
        ours = encoder(torch.tensor(ids), torch.tensor(mask), torch.zeros_like(torch.tensor(ids))).numpy()
    used = mask.astype(bool)
    return float(np.abs(ours - reference)[used].max())


def fine_tune(model: CrossEncoder, tok: Tokenizer, pairs: list[tuple[tuple[str, str], int]]) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    steps = EPOCHS * -(-len(pairs) // BATCH)
    warmup = 0.1 * steps
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup)))
    rng = np.random.default_rng(0)
    started = time.monotonic()
    for epoch in range(EPOCHS):
        model.train()
        losses = []
        order = rng.permutation(len(pairs))
        for start in range(0, len(order), BATCH):
            chunk = [pairs[j] for j in order[start:start + BATCH]]
            loss = torch.nn.functional.cross_entropy(model(*encode(tok, [p for p, _ in chunk])),
                                                     torch.tensor([y for _, y in chunk]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
        print(json.dumps({"epoch": epoch, "loss": round(float(np.mean(losses)), 4),
                          "seconds": round(time.monotonic() - started)}), flush=True)


def pair_probabilities(model: CrossEncoder, tok: Tokenizer, rows: list[dict]) -> np.ndarray:
    """As the judge: P(redundant) the mean of both orders, P(contradictory) the forward one."""
    model.eval()

    def run(pairs: list[tuple[str, str]]) -> np.ndarray:
        out = []
        with torch.no_grad():
            for start in range(0, len(pairs), 64):
                out.append(torch.softmax(model(*encode(tok, pairs[start:start + 64])), -1).numpy())
        return np.vstack(out)

    return symmetrize(run([(r["a"], r["b"]) for r in rows]), run([(r["b"], r["a"]) for r in rows]), CLASSES)


def recipe_out_of_fold(rows: list[dict], cache: Path) -> list[np.ndarray]:
    """judge-v8's recipe out of fold on all training pairs (training.cross_validate), cached."""
    if cache.exists():
        return pickle.loads(cache.read_bytes())[1]
    features_of = featurizer(deep=True, models_dir=load_settings().models_dir)
    both = features_of.matrix([(r["a"], r["b"]) for r in rows] + [(r["b"], r["a"]) for r in rows])
    thresholds, runs = training.cross_validate(rows, both[:len(rows)], both[len(rows):], features_of,
                                               training.PARAMS["accurate"])
    cache.write_bytes(pickle.dumps((thresholds, runs)))
    return runs


def figures(truth: np.ndarray, probabilities: np.ndarray) -> dict[str, dict[str, float]]:
    out = {}
    for label in ("redundant", "contradictory"):
        positive = truth == label
        score = probabilities[:, CLASSES.index(label)]
        precision, recall, _ = precision_recall_curve(positive, score)
        f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
        out[label] = {"average_precision": round(float(average_precision_score(positive, score)), 4),
                      **{f"best_f1_at_precision_{p}": round(float(np.where(precision >= p, f1, 0).max()), 3)
                         for p in (0.95, 0.90)}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--language", choices=list(HEADS), default="zh")
    parser.add_argument("--oof-cache", type=Path, default=Path("/tmp/judge_v8_oof.pkl"))
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rows = training.read_pairs(training.TRAIN_FILE)
    ours = np.array([i for i, r in enumerate(rows) if r.get("lang") == args.language])
    fit, held = next(GroupShuffleSplit(1, test_size=0.2, random_state=0).split(
        ours, groups=[rows[i]["group"] for i in ours]))
    fit, held = ours[fit], ours[held]
    model_bytes, tokenizer_json = read_jar(bge.jar_path(load_settings().models_dir, args.language),
                                           bge.JARS[args.language].stem)
    tok = tokenizer(tokenizer_json)
    encoder = Encoder(onnx_weights(model_bytes), HEADS[args.language])
    print(json.dumps({"parity_max_abs_diff": parity(encoder, model_bytes, tok),
                      "fit_pairs": len(fit), "scored_pairs": len(held)}), flush=True)
    model = CrossEncoder(encoder)
    pairs = [((rows[i]["a"], rows[i]["b"]), CLASSES.index(rows[i]["label"])) for i in fit]
    pairs += [((rows[i]["b"], rows[i]["a"]), CLASSES.index(rows[i]["label"]))
              for i in fit if rows[i]["label"] != "contradictory"]
    fine_tune(model, tok, pairs)
    truth = np.array([rows[i]["label"] for i in held])
    cross = pair_probabilities(model, tok, [rows[i] for i in held])
    runs = recipe_out_of_fold(rows, args.oof_cache)
    report = {"cross_encoder": figures(truth, cross), "judge_v8_recipe_shuffle_0": figures(truth, runs[0][held]),
              "judge_v8_recipe_mean_of_3": figures(truth, np.mean([r[held] for r in runs], axis=0))}
    report["diagnostic_blend_0.25"] = figures(truth, 0.75 * runs[0][held] + 0.25 * cross)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
