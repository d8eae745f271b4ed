# Container image for jaxrna and its Nextflow pipelines (workflows/): the docker and apptainer
# profiles run every task in it.
#
#   docker build -t jaxrna:0.1.0 .                                  # NVIDIA GPUs (CUDA 13 wheels)
#   docker build --build-arg JAX_EXTRA= -t jaxrna:0.1.0-cpu .       # CPU only, smaller
#   docker run --rm --gpus all -v "$PWD:/data" -w /data jaxrna:0.1.0 \
#       jaxrna fold test-data/fold_example.fa
#   apptainer build jaxrna-0.1.0.sif docker-daemon://jaxrna:0.1.0  # for -profile apptainer
#
# JAX's CUDA wheels bring their own CUDA libraries; the host needs only the NVIDIA driver
# (docker --gpus all / apptainer --nv, which the gpu profile adds).

FROM python:3.12-slim

ARG JAX_EXTRA=cuda13

LABEL org.opencontainers.image.title="jaxrna" \
      org.opencontainers.image.description="GPU-accelerated RNA dynamic programming: folding, alignment, miRNA targets and RNA-RNA interaction" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="0.1.0"

# procps: Nextflow's task wrapper uses ps to record resource usage
RUN apt-get update \
    && apt-get install -y --no-install-recommends procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/jaxrna
COPY pyproject.toml README.md ./
COPY jaxrna ./jaxrna
RUN if [ -n "$JAX_EXTRA" ]; then pip install --no-cache-dir "jax[${JAX_EXTRA}]"; fi \
    && pip install --no-cache-dir . \
    && rm -rf /opt/jaxrna/build

ENV XLA_PYTHON_CLIENT_PREALLOCATE=false \
    JAXRNA_CACHE_DIR=/tmp/jaxrna-cache \
    PYTHONUNBUFFERED=1

WORKDIR /data
RUN jaxrna --version && jaxrna info
CMD ["jaxrna", "--help"]
