"""Serving /dashboard/: files of the package, a strict policy, ETags and gzip like the docs.

What the page does runs in chromium (tests/test_dashboard.py); here are the answers
themselves: every file the page loads is served with the Content-Security-Policy, revalidates
with its ETag, and is gzipped when accepted; unknown names are 404 problem+json; the API's
answers carry no page policy and CORS stays as configured.
"""

from __future__ import annotations

import re
from importlib.resources import files

from aiohttp.test_utils import TestClient

from .support.clients import MakeClient, get_raw
from .support.factories import KEY_1

PAGE = "/dashboard/"
DIRECTIVES = {
    "script-src": "'self'",
    "style-src": "'self'",
    "connect-src": "'self'",
    "frame-ancestors": "'none'",
    "default-src": "'none'",
}


def policy(header: str) -> dict[str, str]:
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


async def page_urls(client: TestClient) -> list[str]:
    """The page and every file it loads (scripts, modules they import, stylesheets)."""
    page = await (await client.get(PAGE)).text()
    urls = [PAGE, *(PAGE + name for name in re.findall(r'(?:src|href)="([\w.]+)"', page))]
    for url in list(urls):
        if url.endswith(".js"):
            script = await (await client.get(url)).text()
            urls += [PAGE + name for name in re.findall(r'from "\./([\w.]+)"', script)]
    return list(dict.fromkeys(urls))


async def test_every_file_has_the_policy_an_etag_and_gzip(client: TestClient) -> None:
    urls = await page_urls(client)
    assert {PAGE + "main.js", PAGE + "api.js", PAGE + "uPlot.iife.min.js"} <= set(urls)
    for url in urls:
        response, body = await get_raw(client, url, **{"Accept-Encoding": "identity"})
        assert response.status == 200, url
        directives = policy(response.headers["Content-Security-Policy"])
        assert {k: directives[k] for k in DIRECTIVES} == DIRECTIVES, url
        assert "unsafe-inline" not in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        etag = response.headers["ETag"]
        again, empty = await get_raw(client, url, **{"If-None-Match": etag})
        assert (again.status, empty) == (304, b""), url
        assert "Content-Security-Policy" in again.headers
        zipped, _ = await get_raw(client, url, **{"Accept-Encoding": "gzip"})
        if len(body) > 1024:
            assert zipped.headers["Content-Encoding"] == "gzip", url


async def test_the_page_has_no_inline_script_or_style(client: TestClient) -> None:
    page = await (await client.get(PAGE)).text()
    assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
    assert "<style" not in page and "style=" not in page
    assert re.findall(r"\son\w+=", page) == []  # no event handler attributes


async def test_files_come_from_the_package_with_the_chart_library_licence(
    client: TestClient,
) -> None:
    folder = files("app.web") / "static" / "dashboard"
    for name in ("index.html", "uPlot.iife.min.js", "uPlot.LICENSE"):
        _, body = await get_raw(client, PAGE + name, **{"Accept-Encoding": "identity"})
        assert body == (folder / name).read_bytes(), name
    assert b"MIT License" in (folder / "uPlot.LICENSE").read_bytes()


async def test_unknown_files_are_problems_and_the_bare_path_redirects(client: TestClient) -> None:
    """Errors under /dashboard/ carry its security headers too."""
    for name in ("nothing.js", "..%2Fdashboard.py", "__init__.py", "a/b"):
        response = await client.get(PAGE + name)
        assert response.status == 404, name
        assert response.content_type == "application/problem+json"
        directives = policy(response.headers["Content-Security-Policy"])
        assert {k: directives[k] for k in DIRECTIVES} == DIRECTIVES, name
        assert response.headers["X-Frame-Options"] == "DENY", name
    response = await client.post(PAGE)
    assert response.status == 405 and response.headers["Referrer-Policy"] == "no-referrer"
    response = await client.get("/dashboard", allow_redirects=False)
    assert (response.status, response.headers["Location"]) == (301, PAGE)


async def test_api_answers_keep_their_headers_and_cors(make_client: MakeClient) -> None:
    client = await make_client(cors_origins="https://bi.example")
    headers = {"X-API-KEY": KEY_1, "Origin": "https://bi.example"}
    response = await client.get("/api/companies/v1/campaigns", headers=headers)
    assert response.status == 200
    assert "Content-Security-Policy" not in response.headers
    assert response.headers["Access-Control-Allow-Origin"] == "https://bi.example"
    page = await client.get(PAGE, headers={"Origin": "https://bi.example"})
    assert "Content-Security-Policy" in page.headers
