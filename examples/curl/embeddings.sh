#!/usr/bin/env bash
# Embeddings with curl: one vector per input.
GATEWAY_URL="${GATEWAY_URL:-http://127.0.0.1:8080/v1}"
GATEWAY_API_KEY="${GATEWAY_API_KEY:-no-keys-configured}"

curl -sS --fail-with-body "$GATEWAY_URL/embeddings" \
  -H "Authorization: Bearer $GATEWAY_API_KEY" \
  -H "Content-Type: application/json" \
  -d '{"model": "mock", "input": ["The cat sat on the mat.", "A dog barked."], "dimensions": 8}'
