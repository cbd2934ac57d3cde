// The dashboard's only way to the server: the public API with X-API-KEY.
// The key lives in sessionStorage (this tab only); answers are kept in memory with their
// ETag, so a revisited listing costs a 304. A partner's key also names the company it
// reads (X-Company-ID), chosen in the page and kept beside the key.

export const API = "/api/companies/v1";
const KEY = "reporting-dashboard-key";
const COMPANY = "reporting-dashboard-company";
const answers = new Map(); // company and URL -> {etag, body, headers}
// Sign-out replaces it: requests of the session before are aborted, and an answer that
// still arrives is neither drawn nor remembered (it would be the old key's data).
let session = new AbortController();

export class SignedOut extends Error {}

/** A request of a session that has ended since: nothing to show, nothing to say. */
export class Cancelled extends Error {}

export class Refused extends Error {
  constructor(status, problem) {
    super(problem.detail || `The API answered ${status}.`);
    this.status = status;
    this.problem = problem;
  }
}

export function savedKey() {
  return sessionStorage.getItem(KEY);
}

export function signIn(key) {
  sessionStorage.setItem(KEY, key);
}

/** Whether a request can carry `key`: a header holds Latin-1 only, and fetch throws
 * before asking anything when a copy added another character (a zero-width space). */
export function sendable(key) {
  try {
    new Headers({ "X-API-KEY": key });
    return true;
  } catch {
    return false;
  }
}

function forget() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(COMPANY);
}

export function signOut() {
  forget();
  answers.clear();
  session.abort();
  session = new AbortController();
}

/** The company a partner's key reads (null for a company's key, which names none). */
export function savedCompany() {
  return sessionStorage.getItem(COMPANY);
}

export function chooseCompany(id) {
  if (id) sessionStorage.setItem(COMPANY, id);
  else sessionStorage.removeItem(COMPANY);
}

/** The header naming `company` (none for a company's key), read once per request: a
 * switch during a 429's wait must not send a request, or file its answer, as the other's. */
function companyHeader(company) {
  return company ? { "X-Company-ID": company } : {};
}

/** The URL of an API path with its query; empty values are left out. */
export function apiUrl(path, params = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(name, value);
  }
  const text = query.toString();
  return `${API}${path}${text ? `?${text}` : ""}`;
}

/** A value of a list filter, quoted: the API splits bare values at commas ("" is a quote). */
export function listValue(text) {
  const value = (text ?? "").trim();
  return value ? `"${value.replaceAll('"', '""')}"` : undefined;
}

function sleep(seconds, signal) {
  return new Promise((done) => {
    const timer = setTimeout(done, seconds * 1000);
    signal.addEventListener("abort", () => { clearTimeout(timer); done(); }, { once: true });
  });
}

/** Throws Cancelled once the session `ticket` belongs to has ended. */
function check(ticket) {
  if (ticket !== session) throw new Cancelled("Signed out.");
}

/** `work` (a fetch, reading a body) of the session `ticket`: once that session has
 * ended, its answer or error (the abort's) becomes Cancelled. */
async function within(ticket, work) {
  let result;
  try {
    result = await work();
  } catch (error) {
    check(ticket);
    throw error;
  }
  check(ticket);
  return result;
}

/** One request of the session `ticket`; 401 signs out, 429 waits Retry-After and tries
 * again, saying so. */
async function send(ticket, url, headers, onWait) {
  for (;;) {
    check(ticket);
    const key = savedKey();
    if (!key) throw new SignedOut("Sign in with an API key.");
    const response = await within(ticket, () => fetch(url, {
      headers: { "X-API-KEY": key, ...headers },
      cache: "no-store",
      credentials: "omit",
      signal: ticket.signal,
    }));
    if (response.status === 401) {
      const problem = await within(ticket, () => response.json().catch(() => ({})));
      forget(); // the sign-in form that SignedOut brings back ends the session
      throw new SignedOut(problem.detail || "The key was refused.");
    }
    if (response.status !== 429) return response;
    const seconds = Math.max(1, Number(response.headers.get("Retry-After")) || 1);
    onWait(seconds);
    await sleep(seconds, ticket.signal);
    check(ticket); // signed out while waiting: the status line is no longer ours
    onWait(0);
  }
}

/** GET a JSON answer: {body, headers}; a 304 gives the remembered answer. */
export async function getJson(path, params, onWait) {
  const ticket = session;
  const url = apiUrl(path, params);
  const company = savedCompany();
  // The same URL reads another company's records after a partner switches companies.
  const slot = `${company || ""} ${url}`;
  const known = answers.get(slot);
  const headers = { ...companyHeader(company), ...(known ? { "If-None-Match": known.etag } : {}) };
  const response = await send(ticket, url, headers, onWait);
  if (response.status === 304 && known) return known;
  if (!response.ok) {
    const problem = await within(ticket, () => response.json().catch(() => ({})));
    throw new Refused(response.status, problem);
  }
  const answer = { body: await within(ticket, () => response.json()), headers: response.headers };
  const etag = response.headers.get("ETag");
  if (etag) answers.set(slot, { ...answer, etag });
  return answer;
}

/** The key's own facts (/key, which reads no company): its scopes, and the companies a
 * partner's key reads. */
export async function describeKey(onWait) {
  const ticket = session;
  const response = await send(ticket, `${API}/key`, {}, onWait);
  const body = await within(ticket, () => response.json().catch(() => ({})));
  if (!response.ok) throw new Refused(response.status, body);
  return body;
}

/** The records of a CSV text, each with its CRLF: a quoted field may hold line breaks. */
function csvRecords(text) {
  const records = [];
  let start = 0;
  let quoted = false;
  for (let at = 0; at < text.length; at += 1) {
    if (text[at] === '"') quoted = !quoted; // a doubled quote turns it back at once
    else if (!quoted && text.startsWith("\r\n", at)) {
      records.push(text.slice(start, at + 2));
      start = at + 2;
    }
  }
  return start < text.length ? [...records, text.slice(start)] : records;
}

/**
 * Save the CSV of a listing (the API's bytes) as a file: of `params` as they are, or of
 * the pages numbered in `pages` (each after the first without its header row), when the
 * view shows them all; with `latest`, only the last `latest` rows of those pages, newest
 * first, as a table of the latest records shows them.
 */
export async function downloadCsv(path, params, filename, onWait, pages = [null], latest = 0) {
  const ticket = session;
  const headers = companyHeader(savedCompany());
  const parts = [];
  for (const [n, page] of pages.entries()) {
    const query = page === null ? params : { ...params, page };
    const response = await send(ticket, apiUrl(path, { ...query, format: "csv" }), headers, onWait);
    if (!response.ok) {
      const problem = await within(ticket, () => response.json().catch(() => ({})));
      throw new Refused(response.status, problem);
    }
    const bytes = await within(ticket, () => response.blob());
    parts.push(n === 0 ? bytes : bytes.slice((await bytes.text()).indexOf("\r\n") + 2));
  }
  if (latest) {
    const [header, ...rows] = csvRecords(await new Blob(parts).text());
    parts.splice(0, parts.length, header, ...rows.slice(-latest).reverse());
  }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob(parts, { type: "text/csv" }));
  link.download = filename;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}
