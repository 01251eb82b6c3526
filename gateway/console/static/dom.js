// Building the page: every value goes in as text (textContent, setAttribute), never as markup, so a
// prompt, a key name or a model name that holds HTML shows as the characters it is.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(node, props, children) {
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name.toLowerCase().startsWith("on")) {
      throw new Error("event handlers are added with `on`, never as attributes");
    } else if (name === "value" || name === "checked" || name === "disabled" || name === "selected") {
      node[name] = value;
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: h("td", {class: "num"}, "12"). */
export function h(tag, props, ...children) {
  return fill(document.createElement(tag), props, children);
}

/** An SVG element. */
export function s(tag, props, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), props, children);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

function cell(column, row) {
  const content = column.cell(row);
  // A clipped cell keeps its whole text in its tooltip (an attribute set as text, never parsed).
  const title = column.cls === "clip" && typeof content === "string" ? content : undefined;
  return h("td", { class: column.num ? "num" : column.cls, title }, content);
}

/** A table: columns are {label, cell(row) -> node or text, num?: true}. */
export function table(columns, rows, empty = "Nothing to show.") {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : undefined, scope: "col" }, c.label)));
  const body = rows.length
    ? rows.map((row) => h("tr", {}, columns.map((c) => cell(c, row))))
    : [h("tr", {}, h("td", { colspan: columns.length, class: "dim" }, empty))];
  return h("table", {}, h("thead", {}, head), h("tbody", {}, body));
}

export function field(label, input, cls) {
  const id = input.id || `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  return h("div", { class: cls }, h("label", { for: id }, label), input);
}

export function select(id, options, value) {
  return h(
    "select",
    { id },
    options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)),
  );
}

const INT = new Intl.NumberFormat("en-US");

export function int(n) {
  return n === null || n === undefined ? "\u2013" : INT.format(n);
}

export function usd(n) {
  if (n === null || n === undefined) return "\u2013";
  if (n === 0) return "$0";
  return "$" + n.toFixed(n >= 1 ? 2 : n >= 0.01 ? 4 : 6);
}

export function ms(n) {
  return n === null || n === undefined ? "\u2013" : `${INT.format(Math.round(n))} ms`;
}

/** "2026-12-07 14:02:00Z" from an RFC 3339 time. */
export function when(ts) {
  if (!ts) return "\u2013";
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** A status as words as well as colour: "✔ 200 ok", "✖ 502 upstream_error". */
export function statusCell(status, error) {
  const bad = status >= 400 || Boolean(error);
  const text = `${status ?? "?"} ${bad ? error || "error" : "ok"}`;
  return h("span", { class: `status ${bad ? "status-bad" : "status-ok"}` }, text);
}

/** Seconds since the epoch of a datetime-local input's value (local time), or "". */
export function epoch(local) {
  if (!local) return "";
  const t = new Date(local).getTime();
  return Number.isNaN(t) ? "" : String(Math.floor(t / 1000));
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const text = q.toString();
  return text ? `?${text}` : "";
}

/** Show the page at `hash`, loading it again when it is the one shown (a search run twice). */
export function go(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
}
