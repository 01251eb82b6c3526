"""The Responses API with the `openai` SDK: an answer, then a follow-up that continues it by id
(the gateway stores responses, so only the new input is sent)."""

import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

first = client.responses.create(model="mock", instructions="Answer briefly.", input="Suggest a name for a cat.")
print(f"{first.id}: {first.output_text}")

follow_up = client.responses.create(model="mock", previous_response_id=first.id, input="And one for a dog?")
print(f"{follow_up.id}: {follow_up.output_text}")
