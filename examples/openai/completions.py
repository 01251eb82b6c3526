"""Completions with the `openai` SDK: only the base URL and the key point at the gateway."""

import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

completion = client.completions.create(model="mock", prompt="Say this is a test", max_tokens=16)
print(completion.choices[0].text)
print(f"tokens: {completion.usage.prompt_tokens} in, {completion.usage.completion_tokens} out")
