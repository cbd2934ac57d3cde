"""OpenAPI document and Swagger UI, generated from the marshmallow schemas."""

from __future__ import annotations

from aiohttp import web


def setup_openapi(app: web.Application) -> None:
    """Serve /api/docs (Swagger UI) and /api/docs/openapi.json."""
