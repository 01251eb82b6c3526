"""config.yaml: its pydantic models (`settings` and the section modules), strict YAML reading,
`${VAR}` interpolation and the loader that resolves deployments and credentials.

May import `gateway.api`, `policies` and `providers` (a config embeds their option models);
nothing above it (keys, routing, pipeline, observability, http) may be imported here."""
