"""Every URL of the service on one screen."""

from __future__ import annotations

from aiohttp import web

from . import health, views

API = "/api/companies/v1"


def setup_routes(app: web.Application) -> None:
    """Register the endpoints and the health checks (GET routes also answer HEAD)."""
    app.router.add_get(f"{API}/campaigns/{{id}}/events", views.campaign_events)
    app.router.add_get(f"{API}/victimsapi/{{id}}/events", views.employee_events)
    app.router.add_get(f"{API}/course-inscriptions", views.course_inscriptions)
    app.router.add_get(f"{API}/events", views.event_feed)
    app.router.add_get("/healthz", views.healthz)
    app.router.add_get("/readyz", health.readyz)
