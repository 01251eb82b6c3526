"""A streamed Messages answer with the `anthropic` SDK: text as it arrives, then the final message."""

import os

from anthropic import Anthropic

client = Anthropic(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1").removesuffix("/v1"),  # the SDK adds /v1
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

with client.messages.stream(
    model="mock", max_tokens=64, messages=[{"role": "user", "content": "Count to five."}]
) as stream:
    for text in stream.text_stream:
        print(text, end="", flush=True)
    final = stream.get_final_message()
print(f"\nstop_reason: {final.stop_reason}, output tokens: {final.usage.output_tokens}")
