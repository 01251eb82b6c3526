#!/usr/bin/env bash
# The Anthropic Messages API with curl: the key as `x-api-key`, as Anthropic's API takes it.
GATEWAY_URL="${GATEWAY_URL:-http://127.0.0.1:8080/v1}"
GATEWAY_API_KEY="${GATEWAY_API_KEY:-no-keys-configured}"

curl -sS --fail-with-body "$GATEWAY_URL/messages" \
  -H "x-api-key: $GATEWAY_API_KEY" \
  -H "anthropic-version: 2023-06-01" \
  -H "Content-Type: application/json" \
  -d '{"model": "mock", "max_tokens": 64, "messages": [{"role": "user", "content": "Name three colours."}]}'
