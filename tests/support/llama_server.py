"""A real llama-cpp-python server with Gemma 3 270M, as ``make llm-server`` installs it: started on a
free port of 127.0.0.1 for a test, stopped after. Absent (no ``.llm-venv``), the caller skips."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".llm-venv" / "bin" / "python"
MODEL_FILE = ROOT / ".llm-venv" / "gemma-3-270m-q4_k_m.gguf"


def available() -> bool:
    return VENV_PYTHON.is_file() and MODEL_FILE.is_file()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def llama_server(log_file: Path, start_timeout_s: float = 180.0) -> Iterator[str]:
    """The server's OpenAI base URL (``http://127.0.0.1:PORT/v1``) once it answers ``/v1/models``."""
    port = _free_port()
    with log_file.open("w") as log:
        process = subprocess.Popen(
            [str(VENV_PYTHON), "-m", "llama_cpp.server", "--model", str(MODEL_FILE), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", "2048"], stdout=log, stderr=subprocess.STDOUT)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + start_timeout_s
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"llama_cpp.server exited ({process.returncode}): see {log_file}")
                try:
                    with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"llama_cpp.server did not answer in {start_timeout_s} s") from None
                    time.sleep(0.5)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
