"""Providers that speak a client API themselves: the request's own body sent as it came (model and
credential replaced) and the answer relayed as it came, beside the chat view the pipeline reads."""
