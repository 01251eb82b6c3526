"""What operators see: the Prometheus series, the access log, each request's record, /ready's
checks, and the /metrics and /dashboard endpoints.

May import the pipeline and everything below it; `gateway.http` and the composition root
import this package, never the other way round."""
