"""Chat Completions with the `openai` SDK."""

import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

chat = client.chat.completions.create(
    model="mock",
    messages=[
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Name three colours."},
    ],
)
print(chat.choices[0].message.content)
print(f"finish_reason: {chat.choices[0].finish_reason}, total tokens: {chat.usage.total_tokens}")
