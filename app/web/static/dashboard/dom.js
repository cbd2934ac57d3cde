// Building the page: every value goes in as text (textContent), never as HTML.

/** An element with attributes (strings) and children (nodes, or text for strings/numbers). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === true) node.setAttribute(name, "");
    else if (value !== false && value !== null && value !== undefined) node.setAttribute(name, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** A rate of the API (0 to 1, 4 decimals) as a percentage; "–" for null. */
export function percent(rate) {
  return rate === null || rate === undefined ? "–" : `${(rate * 100).toFixed(2)} %`;
}

/** A number of the API as it is ("–" for null). */
export function plain(value) {
  return value === null || value === undefined ? "–" : String(value);
}

export function date(value) {
  return value ? value.slice(0, 10) : "–";
}

/**
 * A table: columns are [heading, row => text or node, {numeric}]; an empty listing says so.
 */
export function table(caption, columns, rows, emptyText = "Nothing to show for these filters.") {
  if (rows.length === 0) return el("p", { class: "empty" }, emptyText);
  const head = el("tr", {}, columns.map(([heading, , options]) =>
    el("th", { scope: "col", class: options?.numeric ? "num" : null }, heading)));
  const body = rows.map((row) => el("tr", {}, columns.map(([, cell, options]) =>
    el("td", { class: options?.numeric ? "num" : null }, cell(row)))));
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": caption },
    el("table", {}, el("caption", {}, caption), el("thead", {}, head), el("tbody", {}, body)));
}

/**
 * Values of an import side by side, each in its own <bdi>: right-to-left text or an
 * override (U+202E) in one value cannot reorder or reverse the others.
 */
export function apart(separator, values) {
  return values.flatMap((value, n) => [n ? separator : null, el("bdi", {}, value)]);
}

/** A section with a heading, its content and optional actions (buttons) beside the heading. */
export function section(title, ...content) {
  return headed(title, title, ...content);
}

/** A section whose heading is nodes (`label`, its text, names the section). */
export function headed(label, heading, ...content) {
  return el("section", { class: "card", "aria-label": label }, el("h2", {}, heading), ...content);
}

export function notAvailable(what) {
  return el("p", { class: "unavailable" }, `${what} is not available on this server.`);
}

export function loading() {
  return el("p", { class: "loading", "aria-busy": "true" }, "Loading…");
}

/** A form of labelled fields: [name, label, {type, options, min}]; submit calls onSubmit. */
export function filterForm(label, fields, values, onSubmit) {
  const form = el("form", { class: "filters", "aria-label": label });
  for (const [name, text, options = {}] of fields) {
    const id = `f-${name}`;
    let input;
    if (options.choices) {
      // A value of the URL that is no choice is shown as it is, not as the first choice:
      // the form says what was asked, and the API's 400 why it is refused.
      const value = values[name] ?? "";
      const known = options.choices.some(([choice]) => choice === value);
      const choices = known || value === "" ? options.choices : [...options.choices, [value, value]];
      input = el("select", { id, name }, choices.map(([choice, caption]) =>
        el("option", { value: choice, selected: choice === value }, caption)));
    } else {
      input = el("input", { id, name, type: options.type || "text", min: options.min });
      input.value = values[name] ?? "";
    }
    form.append(el("div", { class: "field" }, el("label", { for: id }, text), input));
  }
  form.append(el("button", { type: "submit" }, "Apply"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    onSubmit(Object.fromEntries(new FormData(form)));
  });
  return form;
}

/**
 * Previous/next links for a listing answer (X-Page, X-Total-Pages, X-Total-Count). A page
 * past the end (an old bookmark, a typed URL) links back to the last page instead: its
 * "previous" would be just as empty.
 */
export function pager(headers, hrefOfPage) {
  const page = Number(headers.get("X-Page") || 1);
  const pages = Math.max(Number(headers.get("X-Total-Pages") || 1), 1);
  const total = headers.get("X-Total-Count") || "0";
  let back = page > 1 ? el("a", { href: hrefOfPage(page - 1), rel: "prev" }, "← Previous") : null;
  if (page > pages) back = el("a", { href: hrefOfPage(pages) }, `← Back to page ${pages}, the last`);
  return el("nav", { class: "pager", "aria-label": "Pages" }, back,
    el("span", {}, `Page ${page} of ${pages} (${total} in all)`),
    page < pages ? el("a", { href: hrefOfPage(page + 1), rel: "next" }, "Next →") : null);
}
