"""Gateway API keys and virtual keys: records, stores (config and Redis), authentication, the admin
API and the `gateway keys` commands. Import the modules themselves: this package imports nothing,
so that `gateway.config` can use `gateway.keys.policy` without an import cycle."""
