"""Serving the dashboard: one page and its assets, shipped in the package (static/dashboard).

The page is a client of the public API and nothing else, so serving it is serving files:
each body is read once and answered like the documentation's (ETag, 304, gzip), with a
Content-Security-Policy that allows only this origin's scripts, styles and requests, no
inline code, and no framing. The API's own answers (and its CORS) are untouched.
"""

from __future__ import annotations

from importlib.resources import files

from aiohttp import web

from .swagger import FixedBody

DASHBOARD_URL = "/dashboard/"
FILES = files("app.web") / "static" / "dashboard"
CONTENT_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
# No inline script or style, requests to this origin only, never inside a frame.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def dashboard_assets() -> dict[str, FixedBody]:
    """Every servable file of the dashboard's folder, by name (the licence is served too)."""
    assets = {}
    for entry in FILES.iterdir():
        suffix = entry.name[entry.name.rfind(".") :]
        kind = CONTENT_TYPES.get(suffix, "text/plain" if suffix == ".LICENSE" else None)
        if kind is not None:
            assets[entry.name] = FixedBody(entry.read_bytes, kind)
    return assets


def setup_dashboard(app: web.Application) -> None:
    """Serve /dashboard/ (index.html) and /dashboard/{name}; /dashboard redirects there."""
    assets = dashboard_assets()
    page = assets["index.html"]

    async def dashboard_page(request: web.Request) -> web.StreamResponse:
        return await page.respond(request)

    async def dashboard_asset(request: web.Request) -> web.StreamResponse:
        asset = assets.get(request.match_info["name"])
        if asset is None:
            raise web.HTTPNotFound()
        return await asset.respond(request)

    async def to_dashboard(request: web.Request) -> web.StreamResponse:
        raise web.HTTPMovedPermanently(DASHBOARD_URL)

    app.router.add_get(DASHBOARD_URL.rstrip("/"), to_dashboard)
    app.router.add_get(DASHBOARD_URL, dashboard_page)
    app.router.add_get(f"{DASHBOARD_URL}{{name}}", dashboard_asset)


def add_dashboard_policy(request: web.Request, response: web.StreamResponse) -> None:
    """The dashboard's security headers on every answer under it: its files, their 304s,
    and its errors (a file it does not have, a method it does not take)."""
    if request.path.startswith(DASHBOARD_URL[:-1]):
        response.headers.update(PAGE_HEADERS)
