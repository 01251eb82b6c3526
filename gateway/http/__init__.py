"""aiohttp's side: handlers (read, call the pipeline, render), the middleware every request
passes, the HTTP/1.1 protocol with enveloped parser errors, the request headers the gateway
reads, and the typed keys of the application.

May import every gateway package below it; only the composition root (`gateway.app`) imports it."""
