"""Choosing where a request goes and how it gets there: the route plan (by name, alias or tags),
strategies, the attempt loop with retries and fallbacks, circuit breakers, deployment state and
the counters of what routing did.

May import `gateway.api`, `gateway.config`, `policies` and `providers`; not `gateway.keys`,
`gateway.pipeline` or anything above."""
