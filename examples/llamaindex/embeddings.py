"""LlamaIndex's `OpenAILikeEmbedding` through the gateway (package llama-index-embeddings-openai-like)."""

import os

from llama_index.embeddings.openai_like import OpenAILikeEmbedding

embed_model = OpenAILikeEmbedding(
    model_name="mock",
    api_base=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

query = embed_model.get_query_embedding("Where did the cat sit?")
documents = embed_model.get_text_embedding_batch(["The cat sat on the mat.", "A dog barked."])
print(f"query: {len(query)} dimensions; documents: {len(documents)} vectors of {len(documents[0])}")
