#!/usr/bin/env bash
# Chat Completions with curl.
GATEWAY_URL="${GATEWAY_URL:-http://127.0.0.1:8080/v1}"
GATEWAY_API_KEY="${GATEWAY_API_KEY:-no-keys-configured}"

curl -sS --fail-with-body "$GATEWAY_URL/chat/completions" \
  -H "Authorization: Bearer $GATEWAY_API_KEY" \
  -H "Content-Type: application/json" \
  -d '{"model": "mock", "messages": [{"role": "user", "content": "Name three colours."}]}'
