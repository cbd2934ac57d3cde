"""The enumerations of the interface, defined once.

The databases' CHECK constraints (both stores), the fixture format, the query
parameters and the response schemas all take them from here.
"""

from __future__ import annotations

EVENT_TYPES = ("open", "click", "report", "fail")
SECTION_TYPES = ("lecture", "video", "quiz", "exam", "survey")
INSCRIPTION_STATUSES = ("not_started", "in_progress", "completed")
SECTION_STATUSES = ("APPROVED", "DISAPPROVED")
DELIVERY_STATUSES = ("succeeded", "failed")  # a webhook delivery attempt
# filter[automation]: keep every event, or leave out the automated ones, or leave out the
# suspected and the automated ones (app/data/automation.py decides the verdicts).
AUTOMATION_FILTERS = ("include", "exclude_automated", "exclude_suspected")
