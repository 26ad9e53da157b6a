# GPU image for omnieval: CUDA vLLM, Ray, PyAV/ffmpeg and omnieval. Usable as the Ray cluster image
# (head and workers), e.g. `ray up` or KubeRay with image: <registry>/omnieval:<tag>.
# Build: docker build -t omnieval:latest .
FROM vllm/vllm-openai:v0.11.0

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
RUN pip install --no-cache-dir -e ".[hf]" \
    && python -c "import vllm, ray, av, numba, omnieval; print('omnieval image ok')"
