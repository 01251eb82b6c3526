#!/usr/bin/env bash
# A streamed chat answer with curl: server-sent events, `data: {...}` per chunk, then `data: [DONE]`.
GATEWAY_URL="${GATEWAY_URL:-http://127.0.0.1:8080/v1}"
GATEWAY_API_KEY="${GATEWAY_API_KEY:-no-keys-configured}"

curl -sS -N --fail-with-body "$GATEWAY_URL/chat/completions" \
  -H "Authorization: Bearer $GATEWAY_API_KEY" \
  -H "Content-Type: application/json" \
  -d '{"model": "mock", "stream": true, "messages": [{"role": "user", "content": "Count to five."}]}'
