"""Serving the documentation: Swagger UI's page and assets, and the OpenAPI document.

These bodies never change while the process runs, so each is read (and, for clients that
accept gzip, compressed) once, on first use. Like the API's answers (contract.md 7) every
200 carries a weak ETag, If-None-Match gives 304, and bodies over 1 KiB are gzipped.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from collections.abc import Callable

from aiohttp import hdrs, web
from aiohttp_apigami.swagger_ui import SWAGGER_UI_STATIC_FILES

from .bodies import GZIP_MIN_BYTES, accepts_gzip
from .responder import etag_matches

DOCS_URL = "/api/docs"
SPEC_URL = f"{DOCS_URL}/openapi.json"
STATIC_URL = f"{DOCS_URL}/static"
ASSETS = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "text/javascript",
    "favicon-32x32.png": "image/png",
    "favicon-16x16.png": "image/png",
}
COMPRESSIBLE = ("text/", "application/json")  # PNG is compressed already


class FixedBody:
    """One unchanging body with its ETag and, once asked for, its gzip encoding."""

    def __init__(self, load: Callable[[], bytes], content_type: str) -> None:
        self._load = load
        self._content_type = content_type
        self._textual = content_type.startswith(COMPRESSIBLE)
        self._body: bytes | None = None
        self._gzipped: bytes | None = None
        self._etag = ""

    async def respond(self, request: web.Request) -> web.Response:
        """200 with the body (gzipped when accepted and worth it), or 304."""
        if self._body is None:
            body = await asyncio.to_thread(self._load)
            self._etag = f'W/"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'
            self._body = body
        headers = {hdrs.ETAG: self._etag, hdrs.VARY: "Accept-Encoding"}
        if etag_matches(request, self._etag):
            return web.Response(status=304, headers=headers)
        body = self._body
        if self._textual and len(body) > GZIP_MIN_BYTES and accepts_gzip(request):
            if self._gzipped is None:
                self._gzipped = await asyncio.to_thread(gzip.compress, body, 9, mtime=0)
            body = self._gzipped
            headers[hdrs.CONTENT_ENCODING] = "gzip"
        response = web.Response(body=body, headers=headers, content_type=self._content_type)
        if self._textual:
            response.charset = "utf-8"
        return response


SWAGGER_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="stylesheet" href="{static}/swagger-ui.css">
<link rel="icon" type="image/png" href="{static}/favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="{static}/favicon-16x16.png" sizes="16x16">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{static}/swagger-ui-bundle.js"></script>
<script>
window.onload = function () {{
  window.ui = SwaggerUIBundle({{
    url: "{spec}", dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null
  }});
}};
</script>
</body>
</html>
"""


def setup_swagger(app: web.Application, title: str, document: bytes) -> None:
    """Serve the page at /api/docs, its assets, and the document at /api/docs/openapi.json."""
    # validatorUrl null: the page never calls validator.swagger.io (no outside host).
    page = SWAGGER_PAGE.format(title=title, static=STATIC_URL, spec=SPEC_URL).encode()
    spec_body = FixedBody(lambda: document, "application/json")
    page_body = FixedBody(lambda: page, "text/html")
    assets = {
        name: FixedBody((SWAGGER_UI_STATIC_FILES / name).read_bytes, kind)
        for name, kind in ASSETS.items()
    }

    async def openapi_json(request: web.Request) -> web.Response:
        return await spec_body.respond(request)

    async def swagger_ui(request: web.Request) -> web.Response:
        return await page_body.respond(request)

    async def swagger_asset(request: web.Request) -> web.Response:
        asset = assets.get(request.match_info["name"])
        if asset is None:
            raise web.HTTPNotFound()
        return await asset.respond(request)

    app.router.add_get(SPEC_URL, openapi_json)
    app.router.add_get(DOCS_URL, swagger_ui)
    app.router.add_get(f"{STATIC_URL}/{{name}}", swagger_asset)
