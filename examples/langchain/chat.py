"""LangChain's `ChatOpenAI` through the gateway: a prompt piped into the model, plain and streamed."""

import os

from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI

llm = ChatOpenAI(
    model="mock",
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)
chain = ChatPromptTemplate.from_messages([("system", "Answer briefly."), ("user", "{question}")]) | llm

print(chain.invoke({"question": "What is a gateway?"}).content)
for piece in chain.stream({"question": "Count to five."}):
    print(piece.content, end="", flush=True)
print()
