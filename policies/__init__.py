"""What a deployment's policies apply around the upstream call: the response cache (`cache`),
guardrails (`guardrails`), rate limits and budgets (`limits`), and the bounded Redis pool they
share (`redis_pool`, finding a Sentinel-named master through `redis_sentinel`). Of the gateway,
they import only the contract, `gateway.api`."""
