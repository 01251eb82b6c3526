"""The operator's console at /console: static pages (no data in them, no inline script) that use the
admin API with a session cookie, and the sessions themselves (signed, CSRF-guarded)."""
