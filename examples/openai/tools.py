"""A tool call round trip with the `openai` SDK: the model calls a function, we run it, and send
its result back for the final answer. (The mock calls a tool only when `tool_choice` requires it.)"""

import json
import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)
weather_tool = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
messages = [{"role": "user", "content": "What is the weather in Paris?"}]

first = client.chat.completions.create(model="mock", messages=messages, tools=[weather_tool], tool_choice="required")
call = first.choices[0].message.tool_calls[0]
print(f"tool call: {call.function.name}({call.function.arguments})")

result = {"city": json.loads(call.function.arguments)["city"], "forecast": "sunny, 24 °C"}
messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
final = client.chat.completions.create(model="mock", messages=messages, tools=[weather_tool])
print(f"answer: {final.choices[0].message.content}")
