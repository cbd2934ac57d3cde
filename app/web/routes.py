"""Every URL of the service on one screen."""

from __future__ import annotations

from aiohttp import web

from . import views

API = "/api/companies/v1"
PARTNERS = "/api/partners/v1"


def setup_routes(app: web.Application) -> None:
    """Register the endpoints and the health checks (GET routes also answer HEAD).

    ``{id}`` never matches a ``/``: ``/campaigns/{id}`` and ``/campaigns/{id}/events``
    are distinct resources whatever their order.
    """
    app.router.add_get(f"{API}/campaigns", views.campaign_list)
    app.router.add_get(f"{API}/campaigns/{{id}}", views.campaign_report)
    app.router.add_get(f"{API}/campaigns/{{id}}/events", views.campaign_events)
    app.router.add_get(f"{API}/victimsapi", views.employee_list)
    app.router.add_get(f"{API}/victimsapi/changes", views.employee_changes)
    app.router.add_get(f"{API}/victimsapi/{{id}}", views.employee_report)
    app.router.add_get(f"{API}/victimsapi/{{id}}/events", views.employee_events)
    app.router.add_get(f"{API}/course-inscriptions", views.course_inscriptions)
    app.router.add_get(f"{API}/course-inscriptions/changes", views.inscription_changes)
    app.router.add_get(f"{API}/events", views.event_feed)
    app.router.add_get(f"{API}/courses", views.course_list)
    app.router.add_get(f"{API}/key", views.key_introspection)
    app.router.add_get(f"{PARTNERS}/companies", views.partner_companies)
    app.router.add_get(f"{API}/webhooks", views.webhook_list)
    app.router.add_get(f"{API}/webhooks/{{id}}/deliveries", views.webhook_deliveries)
    app.router.add_get(f"{API}/stats/phishing", views.phishing_stats)
    app.router.add_get(f"{API}/stats/training", views.training_stats)
    app.router.add_get("/healthz", views.healthz)
    app.router.add_get("/readyz", views.readyz)
