"""Portkey's SDK through the gateway: its client, pointed at the gateway with a gateway key."""

import os

from portkey_ai import Portkey

client = Portkey(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

chat = client.chat.completions.create(model="mock", messages=[{"role": "user", "content": "Name three colours."}])
print(chat.choices[0].message.content)
