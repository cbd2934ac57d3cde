"""The interface's records in marshmallow: response bodies and the problem body.

These schemas generate the OpenAPI document and, in the tests, are the reference the
SQL-built JSON must equal (contract.md section 5).
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from ..data.fields import StrictDate, UtcTimestamp
from ..data.schema import EVENT_TYPES, INSCRIPTION_STATUSES, SECTION_STATUSES, SECTION_TYPES


class VictimSchema(Schema):
    id = fields.Integer(required=True)
    first_name = fields.String(required=True)
    last_name = fields.String(required=True)
    email = fields.String(required=True)
    department = fields.String(required=True)


class CampaignEventSchema(Schema):
    id = fields.Integer(required=True)
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True, metadata={"example": "2026-03-02T09:15:00Z"})
    victim = fields.Nested(VictimSchema, required=True)


class CampaignSchema(Schema):
    id = fields.Integer(required=True)
    title = fields.String(required=True)
    launch_date = UtcTimestamp(required=True, metadata={"example": "2026-03-01T08:00:00Z"})


class FeedEventSchema(Schema):
    id = fields.Integer(required=True)
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True, metadata={"example": "2026-03-02T09:15:00Z"})
    with_captcha = fields.Boolean(required=True)
    ip = fields.String(required=True, allow_none=True, metadata={"example": "203.0.113.7"})
    user_agent = fields.String(required=True, allow_none=True)
    campaign = fields.Nested(CampaignSchema, required=True)
    victim = fields.Nested(VictimSchema, required=True)


class EmployeeEventSchema(Schema):
    id = fields.Integer(required=True)
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True, metadata={"example": "2026-03-02T09:15:00Z"})
    campaign = fields.Nested(CampaignSchema, required=True)


class GroupSchema(Schema):
    name = fields.String(required=True)


class SectionSchema(Schema):
    title = fields.String(required=True)
    section_type = fields.String(required=True, validate=validate.OneOf(SECTION_TYPES))
    completed_at = StrictDate(required=True, allow_none=True)
    result = fields.Float(required=True, allow_none=True, validate=validate.Range(0, 100))
    status = fields.String(
        required=True, allow_none=True, validate=validate.OneOf(SECTION_STATUSES)
    )


class InscriptionSchema(Schema):
    victim_name = fields.String(required=True, metadata={"description": "first last"})
    victim_department = fields.String(required=True)
    course_title = fields.String(required=True)
    start_date = StrictDate(required=True)
    due_date = StrictDate(required=True, allow_none=True)
    status = fields.String(required=True, validate=validate.OneOf(INSCRIPTION_STATUSES))
    victim_email = fields.String(required=True)
    groups = fields.List(fields.Nested(GroupSchema), required=True)
    victim_country = fields.String(required=True)
    events = fields.List(fields.Nested(SectionSchema), required=True)


class ProblemSchema(Schema):
    type = fields.String(required=True, metadata={"example": "about:blank"})
    title = fields.String(required=True, metadata={"example": "Bad Request"})
    status = fields.Integer(required=True, metadata={"example": 400})
    detail = fields.String(required=True)
    request_id = fields.String(required=True)
    errors = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String()),
        metadata={"description": "On a 400: the messages for each offending parameter."},
    )
