"""The contract with clients and with the lower packages: request and response models, the
OpenAI-style error envelope, the gateway's header names, and parsing a body into a request.

A leaf: it imports nothing of the gateway. `policies/` and `providers/` import only this package
of the gateway, so the contract they depend on sits below everything that uses them."""
