# The gateway's image, installed from the hash-locked requirement files: pip refuses any package
# whose version or sha256 differs from the lock's (docs/installs.md). Two targets:
#   runtime (the default, last): every HTTP provider type and the built-in mock (requirements.lock)
#   local: also the in-process engine (`type: local`: requirements-local.lock, and torch's CPU build
#          pinned by requirements-torch.txt, from PyTorch's CPU index: it cannot be hash-locked)
#     docker build --target local -t llm-gateway:local .   (compose: GATEWAY_IMAGE_TARGET=local)
# Both run as the unprivileged user 10001 (numeric, so Kubernetes' runAsNonRoot can verify it) and
# need no writable path but /tmp (deploy/kubernetes runs them with a read-only root filesystem), and
# /var/lib/gateway where compose keeps the request log: a volume mounted there starts out as the
# image's folder, owned by 10001, so the user can write it.
FROM python:3.11-slim AS base
WORKDIR /app
ENV GATEWAY_CONFIG=/etc/gateway/config.yaml \
    GATEWAY_PORT=8080 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin gateway \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/gateway
COPY config.yaml /etc/gateway/config.yaml
EXPOSE 8080
# The port is $GATEWAY_PORT (`gateway serve` reads it): the health check follows it.
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ['GATEWAY_PORT']}/health\", timeout=2)"]
CMD ["gateway", "serve", "--host", "0.0.0.0"]

FROM base AS local
# The dependencies first (a layer that a code change keeps), each at its locked version and hash;
# then torch alone, without dependencies (they are in the lock): PyTorch's CPU index only, as
# PyPI's default torch wheel bundles CUDA (gigabytes).
COPY requirements-local.lock requirements-torch.txt ./
RUN pip install --no-cache-dir --require-hashes -r requirements-local.lock \
    && pip install --no-cache-dir --no-deps --index-url https://download.pytorch.org/whl/cpu -r requirements-torch.txt
COPY pyproject.toml README.md ./
COPY gateway gateway
COPY providers providers
COPY policies policies
# The project itself adds nothing: --no-deps, and its build backend (setuptools) is the locked one.
RUN pip install --no-cache-dir --no-deps --no-build-isolation . \
    && pip check \
    && rm -rf build ./*.egg-info
USER 10001:10001

FROM base AS runtime
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY gateway gateway
COPY providers providers
COPY policies policies
RUN pip install --no-cache-dir --no-deps --no-build-isolation . \
    && pip check \
    && rm -rf build ./*.egg-info
USER 10001:10001
