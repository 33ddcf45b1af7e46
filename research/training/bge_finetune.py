"""Fine-tuning a bge-small encoder (the judge's cross-encoders, the topic encoder): the jar's ONNX
weights loaded into a plain torch BERT whose hidden states match onnxruntime's, and the training
loop both use. Needs the ``research`` extra (torch, onnx); the pipeline only runs exported files.
"""

from __future__ import annotations

import json
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from mem_resources import bge

T = TypeVar("T")


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
        state = {f"{ours}.{kind}": torch.tensor(weights[f"{theirs}.{kind}"].copy())
                 for ours, theirs in names.items() for kind in ("weight", "bias") if f"{theirs}.{kind}" in weights}
        self.load_state_dict(state)
        self.hidden = hidden

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        x = self.words(ids) + self.types(types) + self.positions(torch.arange(ids.shape[1]))[None]
        x = self.norm(x)
        bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, bias)
        return x


def onnx_weights(jar: Path, language: bge.Language) -> dict[str, np.ndarray]:
    """Named initializers of the jar's encoder; the exporter left MatMul weights anonymous, so they
    are named by the node that uses them (and transposed to torch's layout)."""
    with zipfile.ZipFile(jar) as archive:
        model = onnx.load_from_string(archive.read(f"{bge.JARS[language].stem}.onnx"))
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weights = {k: v for k, v in arrays.items() if not k.startswith("onnx::")}
    for node in model.graph.node:
        used = [x for x in node.input if x in arrays and x.startswith("onnx::")]
        if node.op_type == "MatMul" and used:
            weights[node.name.strip("/").removesuffix("/MatMul").replace("/", ".") + ".weight"] = arrays[used[0]].T
    return weights


def train(model: torch.nn.Module, epochs: Sequence[Sequence[T]], loss_of: Callable[[T], torch.Tensor],
          learning_rate: float) -> None:
    """AdamW (weight decay 0.01) over each epoch's batches, linear warm-up over the first 10 % of
    steps then linear decay; one JSON line per epoch with its mean loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    steps = sum(len(batches) for batches in epochs)
    warmup = 0.1 * steps
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup)))
    started = time.monotonic()
    for epoch, batches in enumerate(epochs):
        model.train()
        losses = []
        for batch in batches:
            loss = loss_of(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
        print(json.dumps({"epoch": epoch, "batches": len(losses), "loss": round(float(np.mean(losses)), 4),
                          "seconds": round(time.monotonic() - started)}), flush=True)
