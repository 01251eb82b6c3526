"""The Embeddings API on upstreams that speak another API: each foreign API's request and answer
translation (`gemini`); the OpenAI answer itself is written by `providers.embeddings`."""
