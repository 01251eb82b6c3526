"""The local engine on an encoder folder: the Embeddings API in-process (`provider`), the model as
sentence-transformers runs it (`model`). Importing this package imports no torch."""
