# The gateway's image, with the exact versions of requirements.lock. Two targets:
#   runtime (the default): every HTTP provider type and the built-in mock
#   local: also the in-process engine (`type: local`: torch's CPU build and transformers)
#     docker build --target local -t llm-gateway:local .   (compose: GATEWAY_IMAGE_TARGET=local)
FROM python:3.11-slim AS base
WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
COPY gateway gateway
COPY providers providers
COPY policies policies
COPY config.yaml /etc/gateway/config.yaml
RUN useradd --system --no-create-home gateway
ENV GATEWAY_CONFIG=/etc/gateway/config.yaml \
    PYTHONUNBUFFERED=1
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=2)"
CMD ["gateway", "serve", "--host", "0.0.0.0", "--port", "8080"]

FROM base AS local
# PyTorch's CPU index: PyPI's default torch wheel bundles CUDA (gigabytes).
RUN pip install --no-cache-dir -c requirements.lock --extra-index-url https://download.pytorch.org/whl/cpu ".[local]"
USER gateway

FROM base AS runtime
RUN pip install --no-cache-dir -c requirements.lock .
USER gateway
