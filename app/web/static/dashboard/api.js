// The dashboard's only way to the server: the public API with X-API-KEY.
// The key lives in sessionStorage (this tab only); answers are kept in memory with their
// ETag, so a revisited listing costs a 304.

export const API = "/api/companies/v1";
const KEY = "reporting-dashboard-key";
const answers = new Map(); // URL -> {etag, body, headers}

export class SignedOut extends Error {}

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

export function signOut() {
  sessionStorage.removeItem(KEY);
  answers.clear();
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

const sleep = (seconds) => new Promise((done) => setTimeout(done, seconds * 1000));

/** One request; 401 signs out, 429 waits Retry-After and tries again, saying so. */
async function send(url, headers, onWait) {
  for (;;) {
    const key = savedKey();
    if (!key) throw new SignedOut("Sign in with an API key.");
    const response = await fetch(url, {
      headers: { "X-API-KEY": key, ...headers },
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 401) {
      const problem = await response.json().catch(() => ({}));
      signOut();
      throw new SignedOut(problem.detail || "The key was refused.");
    }
    if (response.status !== 429) return response;
    const seconds = Math.max(1, Number(response.headers.get("Retry-After")) || 1);
    onWait(seconds);
    await sleep(seconds);
    onWait(0);
  }
}

/** GET a JSON answer: {body, headers}; a 304 gives the remembered answer. */
export async function getJson(path, params, onWait) {
  const url = apiUrl(path, params);
  const known = answers.get(url);
  const response = await send(url, known ? { "If-None-Match": known.etag } : {}, onWait);
  if (response.status === 304 && known) return known;
  if (!response.ok) {
    throw new Refused(response.status, await response.json().catch(() => ({})));
  }
  const answer = { body: await response.json(), headers: response.headers };
  const etag = response.headers.get("ETag");
  if (etag) answers.set(url, { ...answer, etag });
  return answer;
}

/**
 * Save the CSV of a listing (the API's bytes) as a file; of its first `pages` pages, each
 * after the first without its header row, when the view shows them all.
 */
export async function downloadCsv(path, params, filename, onWait, pages = 1) {
  const parts = [];
  for (let page = 1; page <= pages; page += 1) {
    const query = pages > 1 ? { ...params, page } : params;
    const response = await send(apiUrl(path, { ...query, format: "csv" }), {}, onWait);
    if (!response.ok) throw new Refused(response.status, await response.json().catch(() => ({})));
    const bytes = await response.blob();
    parts.push(page === 1 ? bytes : bytes.slice((await bytes.text()).indexOf("\r\n") + 2));
  }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob(parts, { type: "text/csv" }));
  link.download = filename;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}
