"""Real clients against the gateway: the SDKs and CLIs users point at it."""
