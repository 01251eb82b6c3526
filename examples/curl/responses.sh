#!/usr/bin/env bash
# The Responses API with curl.
GATEWAY_URL="${GATEWAY_URL:-http://127.0.0.1:8080/v1}"
GATEWAY_API_KEY="${GATEWAY_API_KEY:-no-keys-configured}"

curl -sS --fail-with-body "$GATEWAY_URL/responses" \
  -H "Authorization: Bearer $GATEWAY_API_KEY" \
  -H "Content-Type: application/json" \
  -d '{"model": "mock", "instructions": "Answer briefly.", "input": "Suggest a name for a cat."}'
