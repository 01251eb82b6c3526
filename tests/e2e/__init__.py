"""End to end: the gateway as a process or a whole request path, as operators and clients meet it."""
