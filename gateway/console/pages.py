"""The console's files: one page and its scripts and styles, read from the package once, served
under /console with a Content-Security-Policy that lets the page load only its own files (no
inline script or style, no other origin, no framing). They hold no data: the page asks the admin
API for it, with the session cookie."""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from gateway.api.errors import NotFound

PREFIX = "/console"
CONTENT_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "object-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class ConsolePages:
    def __init__(self) -> None:
        folder = resources.files("gateway.console").joinpath("static")
        self._files = {
            entry.name: (entry.read_bytes(), CONTENT_TYPES[suffix])
            for entry in folder.iterdir()
            if (suffix := "." + entry.name.rpartition(".")[2]) in CONTENT_TYPES
        }

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get(PREFIX, self.page)
        app.router.add_get(PREFIX + "/", self.page)
        app.router.add_get(PREFIX + "/static/{name}", self.asset)

    async def page(self, request: web.Request) -> web.Response:
        return self._serve("index.html")

    async def asset(self, request: web.Request) -> web.Response:
        return self._serve(request.match_info["name"])

    def _serve(self, name: str) -> web.Response:
        found = self._files.get(name)  # only the files of the folder: a name is never a path
        if found is None:
            raise NotFound(f"The console has no file {name!r}.")
        body, content_type = found
        return web.Response(body=body, content_type=content_type, charset="utf-8", headers=SECURITY_HEADERS)
