#!/usr/bin/env bash
# Install the real vLLM-Omni 0.30.0 stack into the current Python environment,
# CPU only and without the parts the chunk-transfer adapter never imports.
#
# vllm-omni 0.30.0 pairs with vllm 0.30.0, which pins torch==2.13.0; pip takes
# that as a CPU build from local disk. vllm's own dependency set would pull in
# about 1 GB of triton and unpinned transformers/fastapi versions that
# conflict, so vllm and vllm-omni are installed without dependencies and the
# modules the import path needs are listed here, pinned where it matters.
set -euo pipefail
PIP=(python -m pip install --quiet --disable-pip-version-check)
if python -c "import vllm_omni, vllm" 2>/dev/null; then
    exit 0
fi
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" --no-deps "vllm==0.30.0" "vllm-omni==0.30.0"
"${PIP[@]}" --no-deps "xgrammar>=0.2.1,<1.0" "apache-tvm-ffi==0.1.11"
"${PIP[@]}" "aenum==3.1.16" numpy packaging regex "pydantic>=2.12" cbor2 psutil pyzmq \
    urllib3 "transformers>=5.13,<5.15" aiohttp requests openai-harmony "openai>=2.25" \
    pillow pybase64 cachetools msgspec cloudpickle uvloop py-cpuinfo prometheus-client \
    "fastapi>=0.133,<0.137" partial-json-parser "llguidance>=1.7,<1.8" "tiktoken>=0.6" \
    loguru einops omegaconf prettytable
