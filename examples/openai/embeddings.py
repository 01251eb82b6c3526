"""Embeddings with the `openai` SDK: one vector per input."""

import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

result = client.embeddings.create(model="mock", input=["The cat sat on the mat.", "A dog barked."])
for item in result.data:
    print(f"input {item.index}: {len(item.embedding)} dimensions, starts {[round(x, 3) for x in item.embedding[:3]]}")
print(f"tokens: {result.usage.prompt_tokens}")
