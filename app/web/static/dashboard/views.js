// The views, one function each: (ctx, id, query) -> nodes. ctx.get fetches one API answer,
// ctx.csv makes a "Download CSV" button for a listing, ctx.href builds a view's fragment,
// ctx.may says whether the key holds a scope (yes when the server does not say).
// Every number shown is the API's, formatted only (rates as percentages).

import { Refused, listValue } from "./api.js";
import { PALETTE, funnel, heatColour, rateChart } from "./charts.js";
import {
  apart, date, el, filterForm, headed, notAvailable, pager, percent, plain, section, table,
} from "./dom.js";

const PER_PAGE = 50;
const RATES = [["open_rate", "Open", PALETTE.open], ["click_rate", "Click", PALETTE.click],
  ["report_rate", "Report", PALETTE.report], ["fail_rate", "Fail", PALETTE.fail]];

const num = (heading, cell) => [heading, cell, { numeric: true }];
const campaignLink = (ctx, c) => el("a", { href: ctx.href("campaigns", c.id) }, c.title);
// A person without a name (an import may give none) is shown by email, so links and
// headings have text.
const personName = (p) => `${p.first_name} ${p.last_name}`.trim() || p.email || `#${p.id}`;
// On the page the first and last name are isolated: an override in one does not reverse the other.
const personText = (p) => (`${p.first_name} ${p.last_name}`.trim()
  ? apart(" ", [p.first_name, p.last_name].filter(Boolean)) : personName(p));
const personLink = (ctx, p) => el("a", { href: ctx.href("people", p.id) }, personText(p));

/** An optional answer: null when it is refused with `status` (404: an endpoint not yet
 * on every server; 403: a scope the key lacks). */
async function optional(ctx, path, params, status = 404) {
  try {
    return await ctx.get(path, params);
  } catch (error) {
    if (error instanceof Refused && error.status === status) return null;
    throw error;
  }
}

/**
 * A listing's answer, or {refused: message} when the API refuses one of the view's
 * parameters (400): the view then keeps its form, so the value can be fixed. A 400 naming
 * filter[automation] goes up, where main.js turns that switch off.
 */
async function orRefused(request) {
  try {
    return await request();
  } catch (error) {
    const refused = error instanceof Refused && error.status === 400;
    const errors = refused ? error.problem.errors || {} : {};
    if (!refused || "filter[automation]" in errors) throw error;
    const details = Object.entries(errors).map(([name, why]) => `${name}: ${[why].flat().join(" ")}`);
    const message = [error.message, ...details].join(" ");
    return { refused: el("p", { class: "error", role: "alert" }, message) };
  }
}

/** The rows of the pages after a listing's first answer, joined to its own. */
async function allPages(ctx, path, params, first) {
  const pages = Number(first.headers.get("X-Total-Pages") || 1);
  const rest = await Promise.all(Array.from({ length: Math.max(pages - 1, 0) },
    (_, n) => ctx.get(path, { ...params, page: n + 2 })));
  return { rows: [first, ...rest].flatMap((answer) => answer.body), pages };
}

function campaignColumns(ctx) {
  return [["Campaign", (c) => campaignLink(ctx, c)], ["Launched", (c) => date(c.launch_date)],
    num("Targets", (c) => plain(c.targets)), num("Opened", (c) => plain(c.opened)),
    num("Clicked", (c) => plain(c.clicked)), num("Reported", (c) => plain(c.reported)),
    num("Failed", (c) => plain(c.failed)), num("Click rate", (c) => percent(c.click_rate)),
    num("Fail rate", (c) => percent(c.fail_rate)),
    num("Automated events", (c) => plain(c.automated_events))];
}

function trendTable(caption, rows, columns) {
  return table(caption, [["Period", (r) => `${r.period_start} – ${r.period_end}`], ...columns], rows);
}

export async function overview(ctx) {
  const trendParams = { interval: "month", ...ctx.automation() };
  const latestParams = { per_page: 5, ...ctx.automation() };
  const [trend, training, first] = await Promise.all([
    optional(ctx, "/stats/phishing", trendParams),
    optional(ctx, "/stats/training", { interval: "month" }),
    ctx.get("/campaigns", latestParams),
  ]);
  // The newest campaigns are on the last page; when it holds fewer than 5, the page
  // before it has the rest.
  const pages = Number(first.headers.get("X-Total-Pages") || 1);
  const onLast = Number(first.headers.get("X-Total-Count") || 0) - 5 * (pages - 1);
  const latestPages = pages > 1 && onLast < 5 ? [pages - 1, pages] : [Math.max(pages, 1)];
  const latest = await Promise.all(latestPages.map((page) =>
    (page === 1 ? first : ctx.get("/campaigns", { ...latestParams, page }))));
  const trendSection = trend === null ? notAvailable("The monthly phishing trend") : [
    rateChart("Rates by month (last 13 months)", trend.body.map((r) => r.period_start),
      RATES.map(([field, label, colour]) => [label, trend.body.map((r) => r[field]), colour])),
    trendTable("Phishing by month", trend.body, [num("Sends", (r) => plain(r.sends)),
      ...RATES.map(([field, label]) => num(`${label} rate`, (r) => percent(r[field])))]),
    ctx.csv("/stats/phishing", trendParams, "phishing-by-month.csv")];
  const trainingSection = training === null ? notAvailable("Training completion on time") : [
    rateChart("Completed on time by month", training.body.map((r) => r.period_start),
      [["On time", training.body.map((r) => r.on_time_rate), PALETTE.report]]),
    trendTable("Training by due month", training.body, [num("Due", (r) => plain(r.due)),
      num("On time", (r) => plain(r.completed_on_time)), num("Late", (r) => plain(r.completed_late)),
      num("Not completed", (r) => plain(r.not_completed)),
      num("On-time rate", (r) => percent(r.on_time_rate))]),
    ctx.csv("/stats/training", { interval: "month" }, "training-by-month.csv")];
  const recent = latest.flatMap((answer) => answer.body).slice(-5).reverse();
  return [
    section("Phishing trend", trendSection),
    section("Latest campaigns",
      el("div", { class: "funnels" }, recent.map((c) => funnel(c.title, c))),
      table("Latest campaigns", campaignColumns(ctx), recent, "No campaigns yet."),
      ctx.csv("/campaigns", latestParams, "latest-campaigns.csv", latestPages, 5)),
    section("Training completed on time", trainingSection),
  ];
}

export async function campaigns(ctx, id, query) {
  if (id) return campaign(ctx, id);
  // The title is one value of a list filter: quoted, so a comma or a quote in it stays.
  const filters = { "filter[title]": listValue(query.title), "filter[from_launch_date]": query.from,
    "filter[to_launch_date]": query.to, "filter[with_captcha]": query.captcha };
  const params = { ...filters, ...ctx.automation(), page: query.page || 1, per_page: PER_PAGE };
  const form = filterForm("Campaign filters", [["title", "Title"],
    ["from", "Launched from", { type: "date" }], ["to", "Launched until", { type: "date" }],
    ["captcha", "Captcha-verified events", { choices: [["", "included"], ["false", "left out"]] }]],
  query, (values) => ctx.go("campaigns", null, values));
  const answer = await orRefused(() => ctx.get("/campaigns", params));
  if (answer.refused) return section("Campaigns", form, answer.refused);
  const { body, headers } = answer;
  return section("Campaigns", form,
    table("Campaigns", campaignColumns(ctx), body),
    pager(headers, (page) => ctx.href("campaigns", null, { ...query, page })),
    ctx.csv("/campaigns", params, "campaigns.csv"));
}

async function campaign(ctx, id) {
  const { body: c } = await ctx.get(`/campaigns/${encodeURIComponent(id)}`, ctx.automation());
  return [
    section(c.title,
      el("p", {}, `Launched ${date(c.launch_date)}; median time to first click `,
        `${plain(c.median_seconds_to_first_click)} s, to first report `,
        `${plain(c.median_seconds_to_first_report)} s; automated events `,
        `${plain(c.automated_events)}, suspected ${plain(c.suspected_events)}.`),
      funnel("Funnel", c)),
    section("By department",
      table("By department", [["Department", (d) => d.department],
        num("Targets", (d) => plain(d.targets)), num("Opened", (d) => plain(d.opened)),
        num("Clicked", (d) => plain(d.clicked)), num("Reported", (d) => plain(d.reported)),
        num("Failed", (d) => plain(d.failed)),
        ...RATES.map(([field, label]) => num(`${label} rate`, (d) => percent(d[field])))],
      c.by_department),
      el("p", { class: "note" }, "One campaign is answered in JSON only: no CSV for this table.")),
  ];
}

export async function people(ctx, id, query) {
  if (id) return person(ctx, id);
  // Repeat offenders first: the directory opens on people who failed in 2 campaigns or more.
  const minFailed = query.min_failed ?? "2";
  // The department is one value of a list filter: quoted, so a comma or a quote in it stays.
  const filters = { "filter[min_clicked]": query.min_clicked, "filter[min_failed]": minFailed,
    "filter[department]": listValue(query.department) };
  const params = { ...filters, ...ctx.automation(), page: query.page || 1, per_page: PER_PAGE };
  const form = filterForm("People filters", [
    ["min_failed", "Failed in at least", { type: "number", min: 0 }],
    ["min_clicked", "Clicked in at least", { type: "number", min: 0 }], ["department", "Department"]],
  { ...query, min_failed: minFailed }, (values) => ctx.go("people", null, values));
  const answer = await orRefused(() => ctx.get("/victimsapi", params));
  if (answer.refused) return section("People", form, answer.refused);
  const { body, headers } = answer;
  return section("People", form,
    table("People", [["Name", (p) => personLink(ctx, p)], ["Department", (p) => p.department],
      ["Country", (p) => p.country], num("Campaigns", (p) => plain(p.phishing.campaigns)),
      num("Clicked", (p) => plain(p.phishing.clicked)), num("Failed", (p) => plain(p.phishing.failed)),
      num("Reported", (p) => plain(p.phishing.reported)),
      num("Courses overdue", (p) => plain(p.training.overdue))], body),
    pager(headers, (page) => ctx.href("people", null, { ...query, min_failed: minFailed, page })),
    ctx.csv("/victimsapi", params, "people.csv"));
}

function facts(caption, pairs) {
  return el("dl", { class: "facts", "aria-label": caption },
    pairs.map(([term, value]) => [el("dt", {}, term), el("dd", {}, value)]));
}

async function person(ctx, id) {
  const path = `/victimsapi/${encodeURIComponent(id)}`;
  const params = { page: ctx.query.page || 1, per_page: PER_PAGE, ...ctx.automation() };
  // A key without events:read still shows the person; the history says what it needs
  // (and is not asked for when /key says so: its 403 would be a console error).
  const events = ctx.may("events:read") ? optional(ctx, `${path}/events`, params, 403) : null;
  const [{ body: p }, history] = await Promise.all([ctx.get(path, ctx.automation()), events]);
  const { phishing, training } = p;
  return [
    headed(personName(p), personText(p),
      el("p", {}, apart(" · ", [p.email, p.department, p.country]),
        p.groups.length ? [" · ", apart(", ", p.groups.map((g) => g.name))] : null),
      el("div", { class: "blocks" },
        facts("Phishing", [["Campaigns", plain(phishing.campaigns)], ["Opened", plain(phishing.opened)],
          ["Clicked", plain(phishing.clicked)], ["Reported", plain(phishing.reported)],
          ["Failed", plain(phishing.failed)], ["Last event", plain(phishing.last_event_at)]]),
        facts("Training", [["Inscriptions", plain(training.inscriptions)],
          ["Not started", plain(training.not_started)], ["In progress", plain(training.in_progress)],
          ["Completed", plain(training.completed)], ["Overdue", plain(training.overdue)]]))),
    section("Event history", history === null
      ? el("p", { class: "unavailable" }, "The event history needs a key with events:read.")
      : [table("Event history", [["When", (e) => e.timestamp], ["Event", (e) => e.type],
        ["Campaign", (e) => campaignLink(ctx, e.campaign)]], history.body, "No events."),
      pager(history.headers, (page) => ctx.href("people", id, { page })),
      ctx.csv(`${path}/events`, params, `events-${id}.csv`)]),
  ];
}

export async function heatmap(ctx, id, query) {
  const rate = RATES.some(([field]) => field === query.rate) ? query.rate : "fail_rate";
  const by = query.by || "department";
  const interval = query.interval || "quarter";
  const params = { interval, group_by: by, per_page: 500, ...ctx.automation() };
  const form = filterForm("Heatmap settings", [
    ["rate", "Rate", { choices: RATES.map(([field, label]) => [field, label]) }],
    ["by", "By", { choices: [["department", "Department"], ["country", "Country"], ["team", "Team"]] }],
    ["interval", "Period", { choices: [["week", "Week"], ["month", "Month"], ["quarter", "Quarter"],
      ["year", "Year"]] }]],
  { rate, by, interval }, (values) => ctx.go("heatmap", null, values));
  const answer = await orRefused(() => optional(ctx, "/stats/phishing", params));
  if (answer === null) return section("Heatmap", form, notAvailable("The heatmap (phishing by group)"));
  if (answer.refused) return section("Heatmap", form, answer.refused);
  // Every page: rows come period by period, so a first page alone would lose the latest.
  const { rows, pages } = await allPages(ctx, "/stats/phishing", params, answer);
  const periods = [...new Set(rows.map((r) => r.period_start))];
  const groups = [...new Set(rows.map((r) => r[by]))];
  const cells = new Map(rows.map((r) => [`${r[by]}\u0000${r.period_start}`, r]));
  const label = RATES.find(([field]) => field === rate)[1];
  const grid = groups.length === 0 ? el("p", { class: "empty" }, "No sends in this window.")
    : el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Heatmap" },
      el("table", { class: "heat" },
        el("caption", {}, `${label} rate by ${by} and ${interval}`),
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, by),
          periods.map((period) => el("th", { scope: "col" }, period)))),
        el("tbody", {}, groups.map((group) => el("tr", {}, el("th", { scope: "row" }, group),
          periods.map((period) => {
            const row = cells.get(`${group}\u0000${period}`);
            const value = row ? row[rate] : null;
            const cell = el("td", { class: "num" }, percent(value));
            if (value !== null && value !== undefined) {
              const colour = heatColour(value);
              cell.style.background = colour.background;
              cell.style.color = colour.text;
            }
            return cell;
          }))))));
  const every = Array.from({ length: Math.max(pages, 1) }, (_, n) => n + 1);
  return section("Heatmap", form, grid, ctx.csv("/stats/phishing", params, "heatmap.csv", every));
}

export async function training(ctx, id, query) {
  const yesterday = new Date(Date.now() - 86400000).toISOString().slice(0, 10);
  const courseParams = { page: query.courses_page || 1, per_page: PER_PAGE };
  const dueParams = { "filter[to_due_date]": yesterday, page: query.page || 1, per_page: PER_PAGE };
  const [courses, due] = await Promise.all([
    ctx.get("/courses", courseParams), ctx.get("/course-inscriptions", dueParams)]);
  return [
    section("Course coverage",
      table("Course coverage", [["Course", (c) => c.title],
        num("Inscriptions", (c) => plain(c.inscriptions)), num("Not started", (c) => plain(c.not_started)),
        num("In progress", (c) => plain(c.in_progress)), num("Completed", (c) => plain(c.completed)),
        num("Overdue", (c) => plain(c.overdue)), num("Completion rate", (c) => percent(c.completion_rate)),
        num("Average result", (c) => (c.average_result === null ? "–" : c.average_result.toFixed(1)))], courses.body, "No courses."),
      pager(courses.headers, (page) => ctx.href("training", null, { ...query, courses_page: page })),
      ctx.csv("/courses", courseParams, "courses.csv")),
    section("Inscriptions due before today",
      el("p", { class: "note" }, "Those not completed are overdue."),
      table("Inscriptions due before today", [["Person", (i) => i.victim_name],
        ["Department", (i) => i.victim_department], ["Course", (i) => i.course_title],
        ["Due", (i) => plain(i.due_date)], ["Status", (i) => i.status]], due.body, "None."),
      pager(due.headers, (page) => ctx.href("training", null, { ...query, page })),
      ctx.csv("/course-inscriptions", dueParams, "inscriptions-due.csv")),
  ];
}
