"""contract.md 16 (importing from GoPhish), the reading and mapping half, without a database.

Pins: GoPhish instants (fractions, offsets, the zero date) become whole-second UTC
instants, truncated; timeline messages map to event types, ``Email Sent`` to the target's
``sent_at`` and the rest are skipped and counted; ``details`` gives ``ip``/``user_agent``
(nulls when empty or not JSON, never an error); employees are matched by email within the
company (the domain in any case, the local part in ASCII case only); only results sent to
are targets; ids are stable, under 2^53, and depend on company and source; the people CSV
fills department and country; a malformed export is refused whole, naming each entry's path
(format and reference problems in one run, a lone surrogate or a non-ASCII digit too), with
a bounded number of lines however large the junk. The fixture tests/data/gophish_export.json is
written from GoPhish's documented Campaign, Result and Event fields.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from marshmallow import ValidationError

from app.tools.gophish_format import (
    EVENT_OF_MESSAGE,
    MAX_EXPORT_BYTES,
    MAX_PROBLEMS,
    SENT_MESSAGE,
    GoInstant,
    Problems,
    browser_of,
    mailbox,
    read_export,
    read_people,
)
from app.tools.gophish_ids import MAX_SAFE_ID
from app.tools.gophish_mapping import Context, stable_id, to_fixture
from app.tools.loader import LoadError

EXPORT = Path(__file__).parent / "data" / "gophish_export.json"
ZERO = "0001-01-01T00:00:00Z"


def export() -> list[dict[str, Any]]:
    """The fixture export, parsed afresh (tests edit their copy)."""
    return json.loads(EXPORT.read_text(encoding="utf-8"))


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def mapped(document: Any, tmp_path: Path, ctx: Context | None = None) -> tuple[dict[str, Any], Any]:
    """Read a document as an export file and map it (company 1, source "gophish")."""
    path = write(tmp_path / "export.json", document)
    problems = Problems(path)
    return to_fixture(read_export(path, problems), ctx or Context(1, "gophish"), problems)


def refusal(document: Any, tmp_path: Path, ctx: Context | None = None) -> list[str]:
    """The problem lines of an export that must be refused."""
    with pytest.raises(LoadError) as info:
        mapped(document, tmp_path, ctx)
    return info.value.problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-03T09:00:01.999999999Z", "2025-03-03T09:00:01Z"),  # truncated, not rounded
        ("2025-03-03T09:00:01Z", "2025-03-03T09:00:01Z"),
        ("2025-03-03T10:00:02.25+01:00", "2025-03-03T09:00:02Z"),
        ("2025-04-01T22:30:00.5-04:00", "2025-04-02T02:30:00Z"),  # the UTC date changes
        ("2025-04-01T23:59:59.999999999Z", "2025-04-01T23:59:59Z"),  # stays on its date
        ("2024-02-29T00:00:00.1+00:00", "2024-02-29T00:00:00Z"),
    ],
)
def test_instants_become_whole_utc_seconds(text: str, expected: str) -> None:
    instant = GoInstant().deserialize(text)
    assert instant.utc.strftime("%Y-%m-%dT%H:%M:%SZ") == expected


def test_the_zero_date_means_unset() -> None:
    assert GoInstant().deserialize(ZERO) is None


@pytest.mark.parametrize(
    "text",
    [
        "2025-03-03 09:00:00Z",
        "2025-03-03T09:00:00",
        "2025-02-30T00:00:00Z",
        "2025-03-03T24:00:00Z",
        "2025-03-03T09:00:00.1234567890Z",
        "2025-03-03T09:00:00+24:00",
        "２０２５-03-03T09:00:00Z",  # fullwidth digits: ASCII digits only
        "2025-03-03T09:00:0٥Z",
        "2025-03-03T09:00:00.１Z",
        "1969-12-31T23:59:59Z",
        "1970-01-01T05:29:59+05:30",  # 1969 in UTC
        "9999-12-31T23:00:00-12:00",  # past the year 9999 in UTC
        "0001-01-01T00:00:00+01:00",
        "",
        1741000000,
        None,
        ["2025-03-03T09:00:00Z"],
    ],
)
def test_other_instants_are_refused(text: Any) -> None:
    with pytest.raises(ValidationError):
        GoInstant().deserialize(text)


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        (
            '{"payload":{},"browser":{"address":"192.0.2.1","user-agent":"UA/1"}}',
            ("192.0.2.1", "UA/1"),
        ),
        ('{"browser":{"address":"192.0.2.1"}}', ("192.0.2.1", None)),
        ('{"payload":{"username":["x"]}}', (None, None)),
        ('{"browser":"192.0.2.1"}', (None, None)),
        ('{"browser":{"address":17,"user-agent":["UA"]}}', (None, None)),
        ("", (None, None)),
        (None, (None, None)),
        ("{not json", (None, None)),
        ("[1, 2]", (None, None)),
        ("[" * 100_000, (None, None)),
        ('{"browser":{"address":"\\ud800","user-agent":"UA\\udc00"}}', (None, None)),
        ('{"browser":{"address":"192.0.2.1\\u0000","user-agent":"UA\\u0000"}}', (None, None)),
        (
            '{"browser":{"address":"' + "1" * 46 + '","user-agent":"' + "U" * 1001 + '"}}',
            (None, "U" * 1000),
        ),
    ],
)
def test_details_give_ip_and_user_agent_or_nulls(details: Any, expected: Any) -> None:
    assert browser_of(details) == expected


def test_the_fixture_maps_message_by_message(tmp_path: Path) -> None:
    source = export()
    doc, summary = mapped(source, tmp_path)
    people = {e["email"].casefold(): e["id"] for e in doc["employees"]}
    campaigns = {c["title"]: c for c in doc["campaigns"]}
    # Launch dates: the offset is converted; a zero launch_date falls back to created_date.
    assert campaigns["Payroll update"]["launch_date"] == "2025-03-03T09:00:00Z"
    assert campaigns["Password expiry"]["launch_date"] == "2025-04-01T11:30:00Z"
    # One employee per distinct email, whatever its case; names as GoPhish gave them.
    emails = {r["email"].casefold() for c in source for r in c["results"]}
    assert set(people) == emails
    carol = next(e for e in doc["employees"] if e["email"] == "carol.white@acme.example")
    assert (carol["first_name"], carol["last_name"], carol["department"], carol["country"]) == (
        "",
        "",
        "",
        "",
    )
    # A target is a result it was sent to, sent_at its Email Sent instant; Dan's sending
    # failed (Scheduled, then Error Sending Email): no target, counted as never sent.
    payroll = campaigns["Payroll update"]["id"]
    sent = {
        t["employee_id"]: t["sent_at"]
        for t in doc["campaign_targets"]
        if t["campaign_id"] == payroll
    }
    assert sent == {
        people["alice.martin@acme.example"]: "2025-03-03T09:00:01Z",
        people["bob.stone@acme.example"]: "2025-03-03T09:00:02Z",
        people["carol.white@acme.example"]: "2025-03-03T09:00:03Z",
    }
    assert len(doc["campaign_targets"]) == sum(len(c["results"]) for c in source) - 1
    assert (summary.targets, summary.sent, summary.never_sent) == (5, 5, 1)
    # Events: one per mapped message, in the fixture's order, each typed by its message.
    entries = [
        (c["name"], e) for c in source for e in c["timeline"] if e["message"] in EVENT_OF_MESSAGE
    ]
    assert [ev["type"] for ev in doc["campaign_events"]] == [
        EVENT_OF_MESSAGE[e["message"]] for _, e in entries
    ]
    for event, (name, entry) in zip(doc["campaign_events"], entries, strict=True):
        assert event["campaign_id"] == campaigns[name]["id"]
        assert event["employee_id"] == people[entry["email"].casefold()]
        assert event["with_captcha"] is False
        assert event["timestamp"] == GoInstant().deserialize(entry["time"]).utc.strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        assert (event["ip"], event["user_agent"]) == browser_of(entry["details"])
    # The empty and the non-JSON details strings gave nulls, not an error.
    bob = people["bob.stone@acme.example"]
    assert [
        (e["type"], e["ip"], e["user_agent"])
        for e in doc["campaign_events"]
        if e["employee_id"] == bob
    ] == [
        ("open", None, None),
        ("report", None, None),
    ]
    # Other messages are skipped and counted, per message.
    skipped = Counter(
        e["message"]
        for c in source
        for e in c["timeline"]
        if e["message"] not in EVENT_OF_MESSAGE and e["message"] != SENT_MESSAGE
    )
    assert summary.skipped == skipped
    assert skipped["Campaign Created"] == 2
    # Submitted credentials never leave the export.
    assert "Spring2025!" in EXPORT.read_text() and "Spring2025!" not in json.dumps(doc)


def test_ids_are_in_range_and_unique(tmp_path: Path) -> None:
    doc, _ = mapped(export(), tmp_path)
    for table in ("employees", "campaigns", "campaign_events"):
        ids = [row["id"] for row in doc[table]]
        assert len(set(ids)) == len(ids)
        assert all(1 <= i <= MAX_SAFE_ID for i in ids)  # JavaScript's safe integers


def test_ids_depend_on_company_and_source_only(tmp_path: Path) -> None:
    first, _ = mapped(export(), tmp_path)
    again, _ = mapped(export(), tmp_path)
    assert again == first
    other_server, _ = mapped(export(), tmp_path, Context(1, "gophish-eu"))
    ids = {t: {r["id"] for r in first[t]} for t in ("campaigns", "campaign_events")}
    for table in ("campaigns", "campaign_events"):
        assert not ids[table] & {r["id"] for r in other_server[table]}
    # The same people: employees are matched by email within the company, not per server.
    assert other_server["employees"] == first["employees"]
    other_company, _ = mapped(export(), tmp_path, Context(2, "gophish"))
    assert not {e["id"] for e in first["employees"]} & {e["id"] for e in other_company["employees"]}


def test_a_later_export_only_adds(tmp_path: Path) -> None:
    full = export()
    early = copy.deepcopy(full)
    early[0]["timeline"] = early[0]["timeline"][:6]
    early[1]["results"] = early[1]["results"][:1]
    early[1]["timeline"] = early[1]["timeline"][:2]
    before, _ = mapped(early, tmp_path)
    after, _ = mapped(full, tmp_path)
    for table in ("employees", "campaigns", "campaign_events", "campaign_targets"):
        earlier = {json.dumps(r, sort_keys=True) for r in before[table]}
        later = {json.dumps(r, sort_keys=True) for r in after[table]}
        assert earlier <= later
        assert (len(later) > len(earlier)) == (table != "campaigns")


def test_identical_entries_get_their_own_ids(tmp_path: Path) -> None:
    document = export()
    opened = document[0]["timeline"][5]
    document[0]["timeline"].append(dict(opened))
    doc, _ = mapped(document, tmp_path)
    repeated = [e for e in doc["campaign_events"] if e["timestamp"] == "2025-03-03T09:12:40Z"]
    assert len(repeated) == 2 and repeated[0]["id"] != repeated[1]["id"]


def test_existing_employees_keep_their_id_and_fields(tmp_path: Path) -> None:
    known = {
        "id": 7,
        "company_id": 1,
        "first_name": "Alicia",
        "last_name": "Martín",
        "email": "Alice.Martin@ACME.example",
        "department": "Finance",
        "country": "Spain",
    }
    ctx = Context(1, "gophish", existing={known["email"].casefold(): known}, taken_ids={7})
    doc, summary = mapped(export(), tmp_path, ctx)
    assert all(e["email"].casefold() != "alice.martin@acme.example" for e in doc["employees"])
    alice_entries = [
        e
        for c in export()
        for e in c["timeline"]
        if e["message"] in EVENT_OF_MESSAGE and e["email"].casefold() == "alice.martin@acme.example"
    ]
    alice_events = [e for e in doc["campaign_events"] if e["employee_id"] == 7]
    assert len(alice_events) == len(alice_entries) == 5
    assert {t["employee_id"] for t in doc["campaign_targets"]} >= {7}
    assert summary.new_employees == 4 and summary.updated_employees == 0


def test_a_new_employee_id_steps_past_a_taken_one(tmp_path: Path) -> None:
    wanted = stable_id("employee", 1, "erin.novak@acme.example", 0)
    doc, _ = mapped(export(), tmp_path, Context(1, "gophish", taken_ids={wanted}))
    erin = next(e for e in doc["employees"] if e["email"] == "erin.novak@acme.example")
    assert erin["id"] == stable_id("employee", 1, "erin.novak@acme.example", 1)


def test_the_people_file_fills_department_and_country(tmp_path: Path) -> None:
    csv_path = tmp_path / "people.csv"
    csv_path.write_text(
        "\ufeffEmployee ID,EMAIL,Department,Country\r\n"
        "17,alice.martin@ACME.example,Finance,Spain\r\n"
        '18,bob.stone@acme.example,"Fleet, North",\r\n'
        "19,zoe.absent@acme.example,Sales,France\r\n",
        encoding="utf-8",
    )
    people = read_people(csv_path)
    known = {
        "id": 7,
        "company_id": 1,
        "first_name": "Bob",
        "last_name": "Stone",
        "email": "bob.stone@acme.example",
        "department": "Logistics",
        "country": "Germany",
    }
    ctx = Context(1, "gophish", existing={"bob.stone@acme.example": known}, people=people)
    doc, summary = mapped(export(), tmp_path, ctx)
    by_email = {e["email"].casefold(): e for e in doc["employees"]}
    assert (
        by_email["alice.martin@acme.example"]["department"],
        by_email["alice.martin@acme.example"]["country"],
    ) == ("Finance", "Spain")
    # An existing employee keeps everything the file does not give (an empty cell gives nothing).
    assert by_email["bob.stone@acme.example"] == known | {"department": "Fleet, North"}
    assert by_email["carol.white@acme.example"]["department"] == ""
    assert (summary.updated_employees, summary.unmatched_people) == (1, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("email,department\r\na@x.example,Sales\r\n", "line 1: the header lacks country"),
        (
            "email,department,country\r\nnot-an-email,Sales,Spain\r\n",
            "line 2.email: Not a valid email",
        ),
        (
            "email,department,country\r\na@x.example,S,E\r\nA@X.example,T,F\r\n",
            "line 3.email: repeats line 2",
        ),
        ('email,department,country\r\na@x.example,"Sa"les,Spain\r\n', "line 2: not CSV"),
        (
            "email,department,country\r\na@x.example," + "D" * 501 + ",Spain\r\n",
            "line 2.department",
        ),
    ],
)
def test_a_bad_people_file_is_refused_by_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "people.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LoadError) as info:
        read_people(path)
    assert any(line.startswith(f"{path}: {expected}") for line in info.value.problems), info.value


def test_a_people_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_bytes(b"email,department,country\r\nj\xe9@x.example,Ventes,France\r\n")
    with pytest.raises(LoadError, match="not UTF-8"):
        read_people(path)


def edit(path: tuple[Any, ...], value: Any) -> Callable[[Any], Any]:
    """Set one value deep in the export."""

    def apply(document: Any) -> Any:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return document

    return apply


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (edit((0, "id"), "3"), "[0].id: Not a valid integer."),
        (edit((0, "id"), 0), "[0].id: Must be greater than or equal to 1"),
        (edit((0, "name"), ""), "[0].name: Length must be between 1 and 500."),
        (edit((0, "results"), "everyone"), "[0].results: Not a valid list."),
        (edit((1, "results", 0, "email"), "alice"), "[1].results[0].email: Not a valid email"),
        (edit((1, "results", 1), "erin"), "[1].results[1]: Invalid input type."),
        (edit((0, "timeline", 3, "time"), "yesterday"), "[0].timeline[3].time: Not an RFC 3339"),
        (
            edit((0, "timeline", 3, "message"), "Email Deleted"),
            "[0].timeline[3].message: Must be one of",
        ),
        (
            edit((0, "timeline", 3, "details"), {"browser": {}}),
            "[0].timeline[3].details: Not a valid string.",
        ),
        (
            edit((0, "timeline", 5, "email"), "mallory@evil.example"),
            "[0].timeline[5].email: 'mallory@evil.example' is not among the results",
        ),
        (
            edit((0, "timeline", 5, "email"), ""),
            "[0].timeline[5].email: '' is not among the results",
        ),
        (edit((0, "timeline", 5, "time"), ZERO), "[0].timeline[5].time: the zero date"),
        (edit((1, "created_date"), ZERO), "[1].launch_date: unset, as is created_date"),
        (edit((1, "id"), 3), "[1].id: campaign 3 is also at [0]"),
        (edit((1,), "junk"), "[1]: Invalid input type."),
    ],
)
def test_a_malformed_export_is_refused_naming_the_entry(
    tmp_path: Path, change: Callable[[Any], Any], expected: str
) -> None:
    problems = refusal(change(export()), tmp_path)
    assert any(line.startswith(f"{tmp_path / 'export.json'}: {expected}") for line in problems), (
        problems
    )


def test_one_campaign_object_has_paths_without_an_index(tmp_path: Path) -> None:
    campaign = export()[0]
    campaign["timeline"][3]["time"] = 17
    problems = refusal(campaign, tmp_path)
    assert problems == [
        f"{tmp_path / 'export.json'}: timeline[3].time: Not an RFC 3339 instant"
        " (YYYY-MM-DDTHH:MM:SS[.fraction]Z)."
    ]


@pytest.mark.parametrize("document", [42, "campaigns", None, [[]]])
def test_a_document_of_the_wrong_shape_is_refused(tmp_path: Path, document: Any) -> None:
    assert len(refusal(document, tmp_path)) == 1


def test_junk_is_refused_in_a_bounded_number_of_lines(tmp_path: Path) -> None:
    # About 50 MB of valid JSON that is all wrong: millions of wrong entries.
    path = tmp_path / "export.json"
    junk = {"id": 1, "name": "x", "created_date": ZERO, "launch_date": ZERO}
    with path.open("w") as out:
        out.write(json.dumps(junk)[:-1] + ', "timeline": [' + "17," * 17_000_000 + "17]}")
    assert path.stat().st_size > 50_000_000
    with pytest.raises(LoadError) as info:
        read_export(path)
    assert len(info.value.problems) == MAX_PROBLEMS + 1
    assert info.value.problems[0] == f"{path}: timeline[0]: Invalid input type."
    assert info.value.problems[-1] == f"(stopped after {MAX_PROBLEMS} problems)"


@pytest.mark.parametrize(
    "content",
    [
        bytes(range(256)) * 200_000,  # 50 MB of binary junk
        b"[" * 10_000_000,  # nesting far deeper than the parser's recursion
        b'[{"id": 1, "name": "\xff"}]',
    ],
)
def test_unparsable_junk_is_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "export.json"
    path.write_bytes(content)
    with pytest.raises(LoadError) as info:
        read_export(path)
    assert len(info.value.problems) == 1 and "not valid JSON" in info.value.problems[0]


def test_emails_match_by_ascii_case_in_the_local_part_only(tmp_path: Path) -> None:
    """``anna.straße@`` is not ``anna.strasse@``, nor a Kelvin-sign ``Karl@`` ``karl@``:
    different mailboxes; the domain matches in any case, the local part in ASCII case."""

    def person(id_: int, email: str) -> dict[str, Any]:
        names = {"first_name": "", "last_name": "", "department": "", "country": ""}
        return {"id": id_, "company_id": 1, "email": email, **names}

    known = [person(7, "anna.strasse@acme.example"), person(8, "karl@acme.example")]
    known.append(person(9, "bob.stone@acme.example"))
    ctx = Context(1, "gophish", existing={}, taken_ids={7, 8, 9})
    for p in known:
        ctx.existing[mailbox(p["email"])] = p
    document = export()
    results = document[1]["results"]
    for email in ("anna.straße@acme.example", "\u212aarl@acme.example", "BOB.STONE@ACME.Example"):
        results.append({"email": email, "first_name": "", "last_name": ""})
        document[1]["timeline"].append(
            {"email": email, "time": "2025-04-01T11:30:09Z", "message": "Email Sent"}
        )
    doc, _ = mapped(document, tmp_path, ctx)
    new = {e["email"] for e in doc["employees"]}
    assert {"anna.straße@acme.example", "\u212aarl@acme.example"} <= new
    assert "BOB.STONE@ACME.Example" not in new  # the same mailbox as employee 9
    targets = {t["employee_id"] for t in doc["campaign_targets"]}
    assert 9 in targets and not targets & {7, 8}
    assert mailbox("Anna.Strasse@ACME.example") == mailbox("anna.strasse@acme.EXAMPLE")


@pytest.mark.parametrize(("field", "at"), [("name", "[0].name"), ("first_name", "[1].results[0]")])
def test_a_lone_surrogate_is_refused_naming_the_entry(tmp_path: Path, field: str, at: str) -> None:
    document = export()
    entry = document[0] if field == "name" else document[1]["results"][0]
    entry[field] = "Pay\ud800roll"
    problems = refusal(document, tmp_path)
    assert problems == [
        f"{tmp_path / 'export.json'}: {at.removesuffix('.name')}"
        f"{'.name' if field == 'name' else '.first_name'}: Not text: a lone surrogate (U+D800)."
    ]


@pytest.mark.parametrize(("field", "at"), [("name", "[0].name"), ("first_name", "[1].results[0]")])
def test_a_nul_character_is_refused_naming_the_entry(tmp_path: Path, field: str, at: str) -> None:
    """No store's text holds U+0000: named in the export, not in the mapped records."""
    document = export()
    entry = document[0] if field == "name" else document[1]["results"][0]
    entry[field] = "Pay\x00roll"
    assert refusal(document, tmp_path) == [
        f"{tmp_path / 'export.json'}: {at.removesuffix('.name')}"
        f"{'.name' if field == 'name' else '.first_name'}: Not text: a NUL character (U+0000)."
    ]


def test_a_nul_character_in_the_people_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("email,department,country\r\na@x.example,Sa\x00les,Spain\r\n", "utf-8")
    with pytest.raises(LoadError) as info:
        read_people(path)
    assert info.value.problems == [
        f"{path}: line 2.department: Not text: a NUL character (U+0000)."
    ]


def test_format_and_reference_problems_are_reported_in_one_run(tmp_path: Path) -> None:
    document = export()
    document[0]["timeline"][3]["time"] = "yesterday"  # a format problem
    document[0]["timeline"][5]["email"] = "mallory@evil.example"  # a reference problem
    document[1]["results"][0]["first_name"] = "A" * 501  # its timeline is not blamed too
    problems = refusal(document, tmp_path)
    path = tmp_path / "export.json"
    assert problems == [
        f"{path}: [0].timeline[3].time: Not an RFC 3339 instant (YYYY-MM-DDTHH:MM:SS[.fraction]Z).",
        f"{path}: [1].results[0].first_name: Longer than maximum length 500.",
        f"{path}: [0].timeline[5].email: 'mallory@evil.example' is not among the results",
    ]


def test_an_export_over_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """An export is parsed whole (about ten times its size in memory): the cap keeps that
    under a gigabyte."""
    path = tmp_path / "export.json"
    with path.open("wb") as out:
        out.truncate(MAX_EXPORT_BYTES + 1)  # sparse: nothing is written to the disk
    with pytest.raises(LoadError) as info:
        read_export(path)
    assert info.value.problems == [f"{path}: larger than 64 MiB"]
