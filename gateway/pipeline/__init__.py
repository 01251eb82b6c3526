"""The order of a completion request and its steps: `flow.Pipeline` (auth, validate, route,
admit, call), guardrails (`guarding`), the cache around the upstream call (`cached`), limits and
budgets (`admission`, `usage`), the relay of streams, what outlives a departed client
(`exchange`), and the live config with its reloads (`assembly`, `serving`).

May import everything below it: `gateway.api`, `gateway.config`, `gateway.keys`,
`gateway.routing`, `policies`, `providers`. Never `gateway.observability` or `gateway.http`."""
