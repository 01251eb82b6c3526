"""Native pass-through: when a request's own body (the Messages API's) goes to a provider that
speaks its API instead of the chat translation, and when an answer is relayed as it came."""
