#!/usr/bin/env bash
# Install the real vLLM-Omni 0.30.0 stack into the current Python environment,
# CPU only and without the parts the chunk-transfer adapter never imports.
#
# vllm-omni 0.30.0 pairs with vllm 0.30.0, which pins torch==2.13.0; pip takes
# that as a CPU build from local disk. Their own dependency sets would pull in
# about 1 GB of triton and unpinned transformers/fastapi versions that
# conflict, so vllm, vllm-omni and two small native helpers are installed
# without dependencies, after the `vllm` extra of statecore has installed the
# modules the import path needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=(python -m pip install --quiet --disable-pip-version-check)
if python -c "import vllm_omni, vllm" 2>/dev/null; then
    exit 0
fi
"${PIP[@]}" -e ".[vllm,test]"
"${PIP[@]}" --no-deps "vllm==0.30.0" "vllm-omni==0.30.0" \
    "xgrammar>=0.2.1,<1.0" "apache-tvm-ffi==0.1.11"
