FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway gateway
COPY providers providers
COPY policies policies
RUN pip install --no-cache-dir . && useradd --system --no-create-home gateway
COPY config.yaml /etc/gateway/config.yaml

ENV GATEWAY_CONFIG=/etc/gateway/config.yaml \
    PYTHONUNBUFFERED=1
USER gateway
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=2)"
CMD ["gateway", "serve", "--host", "0.0.0.0", "--port", "8080"]
