// The page's frame: sign-in, the fragment router (#view/id?query), the automation switch,
// a partner's choice of company and the status line. Views live in views.js, API calls
// in api.js.

import * as api from "./api.js";
import { el, loading } from "./dom.js";
import * as views from "./views.js";

const VIEWS = { overview: views.overview, campaigns: views.campaigns, people: views.people,
  heatmap: views.heatmap, training: views.training };
// What each view reads, for keys that say their scopes (others see every view).
const SCOPES = { overview: ["reports:read"], campaigns: ["reports:read"],
  people: ["people:read"], heatmap: ["reports:read"], training: ["reports:read", "training:read"] };
const AUTOMATION = "filter[automation]";
const UNSENDABLE = "The key holds a character no request can carry (a copy may add one, such as "
  + "a zero-width space): paste it again.";
const $ = (id) => document.getElementById(id);
let renderCount = 0;
let home = "overview"; // the first view the key may read: what a bare URL opens
let scopes = null; // the key's scopes, when /key says them (null: every request is tried)
let closed = null; // why the key opens no view at all, when /key says so: shown in its place

function say(text) {
  $("status").textContent = text;
}

function waiting(seconds) {
  say(seconds ? `The API's rate limit was reached: trying again in ${seconds} s.` : "");
}

/** "#people/7?page=2" -> {name: "people", id: "7", query: {page: "2"}}. */
function parseHash() {
  const [path, search = ""] = location.hash.replace(/^#/, "").split("?");
  const [name, id] = path.split("/");
  return { name: VIEWS[name] ? name : home, id: id || null,
    query: Object.fromEntries(new URLSearchParams(search)) };
}

function href(name, id, query = {}) {
  const kept = Object.entries(query).filter(([, value]) => value !== "" && value !== undefined);
  const search = new URLSearchParams(kept).toString();
  return `#${name}${id ? `/${encodeURIComponent(id)}` : ""}${search ? `?${search}` : ""}`;
}

function automation() {
  return $("automation").checked ? { [AUTOMATION]: "exclude_automated" } : {};
}

function context(query) {
  return {
    query,
    href,
    automation,
    may: (scope) => scopes === null || scopes.has(scope),
    get: (path, params) => api.getJson(path, params, waiting),
    go: (name, id, values) => { location.hash = href(name, id, values); },
    csv: (path, params, filename, pages = [null], latest = 0) => {
      const button = el("button", { type: "button", class: "csv" }, "Download CSV");
      button.addEventListener("click", () =>
        api.downloadCsv(path, params, filename, waiting, pages, latest).catch(failed));
      return button;
    },
  };
}

function showSignIn(message) {
  api.signOut();
  renderCount += 1; // a render still waiting draws nothing now
  say(""); // nor does a 429's wait: its message goes with the session
  for (const id of ["nav", "session", "view", "company-choice"]) $(id).hidden = true;
  $("view").replaceChildren();
  $("company").replaceChildren();
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message || "";
  $("key").value = "";
  $("key").focus();
}

function failed(error) {
  if (error instanceof api.Cancelled) return; // of a session signed out since
  if (error instanceof api.SignedOut) return showSignIn(error.message);
  const refusesAutomation = error instanceof api.Refused && error.status === 400
    && error.problem.errors && AUTOMATION in error.problem.errors;
  if (refusesAutomation) {
    const box = $("automation");
    box.checked = false;
    box.disabled = true;
    say("Leaving out automated events is not available on this server.");
    return render();
  }
  $("view").replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
}

async function render() {
  if (!api.savedKey()) return showSignIn();
  const { name, id, query } = parseHash();
  const count = ++renderCount;
  $("sign-in").hidden = true;
  for (const node of ["session", "view"]) $(node).hidden = false;
  $("nav").hidden = closed !== null;
  for (const link of $("nav").querySelectorAll("a")) {
    if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const view = $("view");
  if (closed !== null) {
    view.replaceChildren(el("p", { class: "error", role: "alert" }, closed));
    view.dataset.rendered = location.hash || `#${home}`;
    return;
  }
  view.setAttribute("aria-busy", "true");
  delete view.dataset.rendered;
  view.replaceChildren(loading());
  try {
    const nodes = await VIEWS[name](context(query), id, query);
    if (count !== renderCount) return;
    view.replaceChildren(...[nodes].flat());
    view.dataset.rendered = location.hash || `#${home}`; // what the browser tests wait for
    document.title = `${name[0].toUpperCase()}${name.slice(1)} · Reporting dashboard`;
  } catch (error) {
    if (count === renderCount) failed(error);
  } finally {
    view.removeAttribute("aria-busy");
  }
}

/** A partner's key reads several companies, one per request (X-Company-ID): the choice
 * is offered for such a key only, and kept for the tab as the key is. */
function offerCompanies(facts) {
  const companies = facts.partner_id == null ? [] : (facts.companies || []).map(String);
  const saved = api.savedCompany();
  api.chooseCompany(companies.includes(saved) ? saved : companies[0]);
  const options = companies.map((id) => el("option", { value: id }, `Company ${id}`));
  $("company").replaceChildren(...options);
  $("company").value = api.savedCompany() || "";
  $("company-choice").hidden = companies.length === 0;
}

/** The key's scopes, when the server says them: views the key may not read are hidden. */
async function applyScopes() {
  let facts;
  try {
    facts = await api.describeKey(waiting);
  } catch (error) {
    if (error instanceof api.SignedOut || error instanceof api.Cancelled) throw error;
    scopes = null;
    closed = null;
    return; // no introspection on this server: every view stays
  }
  offerCompanies(facts);
  scopes = new Set(String(facts.scope || "").split(" "));
  for (const link of $("nav").querySelectorAll("a")) {
    link.hidden = !SCOPES[link.dataset.view].every((needed) => scopes.has(needed));
  }
  home = [...$("nav").querySelectorAll("a")].find((link) => !link.hidden)?.dataset.view || "overview";
  closed = noViewBecause(facts);
}

/** Why `facts`' key opens no view (every request would be refused), or null: no scope
 * that a view needs, or a partner without companies (no X-Company-ID to send). */
function noViewBecause(facts) {
  const links = [...$("nav").querySelectorAll("a")];
  if (links.every((link) => link.hidden)) {
    const needs = new Map(); // the scopes a view needs -> the views needing exactly those
    for (const link of links) {
      const needed = SCOPES[link.dataset.view].join(" and ");
      needs.set(needed, [...(needs.get(needed) || []), link.textContent]);
    }
    const views = [...needs].map(([needed, names]) => (names.length === 1
      ? `${names[0]} needs ${needed}`
      : `${names.slice(0, -1).join(", ")} and ${names.at(-1)} need ${needed}`));
    return `This key opens no view of the dashboard (its scopes: ${facts.scope || "none"}). `
      + `${views.join("; ")}.`;
  }
  if (facts.partner_id != null && (facts.companies || []).length === 0) {
    return "This partner has no companies yet, so there is nothing to show. A company is added "
      + `to it with the key tool: reporting-keys partner add-company ${facts.partner_id} COMPANY; `
      + "then reload this page.";
  }
  return null;
}

$("sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("key").value.trim();
  if (!key) return;
  if (!api.sendable(key)) return showSignIn(UNSENDABLE);
  api.signIn(key);
  $("key").value = "";
  try {
    await applyScopes();
    await render();
    $("view").focus();
  } catch (error) {
    failed(error);
  }
});
$("sign-out").addEventListener("click", () => {
  showSignIn("Signed out.");
  history.replaceState(null, "", location.pathname);
});
$("automation").addEventListener("change", render);
$("company").addEventListener("change", () => {
  api.chooseCompany($("company").value);
  render();
});
window.addEventListener("hashchange", render);
if (api.savedKey()) applyScopes().then(render, failed);
else showSignIn();
