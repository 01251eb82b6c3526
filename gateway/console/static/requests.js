// The request log: filters, cursor pages, and one request's detail (GET /admin/requests[/{id}]).

import { api, ApiError } from "./api.js";
import { clear, go, epoch, field, h, int, ms, query, select, statusCell, table, usd, when } from "./dom.js";

const TEXT_FILTERS = [
  ["key", "Key"],
  ["team", "Team"],
  ["deployment", "Deployment"],
  ["model", "Model"],
  ["error", "Error code"],
  ["request_id", "Request id"],
  ["trace_id", "Trace id"],
];
const APIS = [["", "Any API"], ["completions", "completions"], ["chat", "chat"], ["embeddings", "embeddings"],
  ["responses", "responses"], ["messages", "messages"]];
const STATUSES = [["", "Any status"], ["2xx", "2xx success"], ["4xx", "4xx refused"], ["5xx", "5xx failed"]];
const PAGE_SIZE = 50;

function localInput(seconds) {
  if (!seconds) return "";
  const d = new Date(Number(seconds) * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function requestLink(id) {
  return h("a", { href: `#/request/${encodeURIComponent(id)}`, class: "request-link" }, id);
}

const COLUMNS = [
  { label: "Time (UTC)", cell: (r) => when(r.ts), cls: "when" },
  { label: "Request", cell: (r) => requestLink(r.id), cls: "clip" },
  { label: "Status", cell: (r) => statusCell(r.status, r.error) },
  { label: "Key", cell: (r) => r.key ?? "\u2013", cls: "clip" },
  { label: "Team", cell: (r) => r.team ?? "\u2013", cls: "clip" },
  { label: "API", cell: (r) => r.api ?? "\u2013" },
  { label: "Model", cell: (r) => r.model ?? "\u2013", cls: "clip" },
  { label: "Deployment", cell: (r) => r.deployment ?? "\u2013", cls: "clip" },
  { label: "Tokens", cell: (r) => int((r.prompt_tokens || 0) + (r.completion_tokens || 0)), num: true },
  { label: "Cost", cell: (r) => usd(r.cost_usd), num: true },
  { label: "Latency", cell: (r) => ms(r.latency_ms), num: true },
];

export async function render(root, params) {
  const inputs = {};
  for (const [name] of TEXT_FILTERS) inputs[name] = h("input", { id: `filter-${name}`, value: params.get(name) || "" });
  inputs.api = select("filter-api", APIS, params.get("api") || "");
  inputs.status = select("filter-status", STATUSES, params.get("status") || "");
  inputs.since = h("input", { id: "filter-since", type: "datetime-local", value: localInput(params.get("since")) });
  inputs.until = h("input", { id: "filter-until", type: "datetime-local", value: localInput(params.get("until")) });
  const form = h(
    "form",
    { id: "request-filters", class: "panel form-grid" },
    field("From", inputs.since),
    field("To", inputs.until),
    TEXT_FILTERS.map(([name, label]) => field(label, inputs[name])),
    field("API", inputs.api),
    field("Status", inputs.status),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "filter-apply" }, "Search"),
      h("button", { type: "reset", id: "filter-clear" }, "Clear")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = { since: epoch(inputs.since.value), until: epoch(inputs.until.value) };
    for (const name of [...TEXT_FILTERS.map(([n]) => n), "api", "status"]) chosen[name] = inputs[name].value.trim();
    go(`#/requests${query(chosen)}`);
  });
  form.addEventListener("reset", (event) => {
    event.preventDefault();
    go("#/requests");
  });
  const results = h("div", { id: "request-results" });
  clear(root).append(h("h1", {}, "Requests"), form, results);
  const filters = {};
  for (const [name, value] of params) filters[name] = value;
  const cursors = [""]; // the cursor of each page shown so far: Previous goes back one
  const show = async () => {
    const cursor = cursors[cursors.length - 1];
    const page = await api("GET", `/admin/requests${query({ ...filters, limit: PAGE_SIZE, cursor })}`);
    const previous = h("button", { type: "button", id: "page-previous", disabled: cursors.length === 1 }, "\u2190 Newer");
    const next = h("button", { type: "button", id: "page-next", disabled: !page.next_cursor }, "Older \u2192");
    previous.addEventListener("click", () => {
      cursors.pop();
      show();
    });
    next.addEventListener("click", () => {
      cursors.push(page.next_cursor);
      show();
    });
    const rows = table(COLUMNS, page.data, "No request matches these filters.");
    rows.id = "request-table";
    clear(results).append(h("div", { class: "scroll" }, rows), h("div", { class: "pager" }, previous, next,
      h("span", { class: "dim" }, `page ${cursors.length}, ${page.data.length} request(s)`)));
  };
  await show();
}

function entry(label, value) {
  return [h("dt", {}, label), h("dd", {}, value ?? "\u2013")];
}

function filterLink(name, value) {
  if (value === null || value === undefined || value === "") return "\u2013";
  return h("a", { href: `#/requests${query({ [name]: value })}` }, String(value));
}

export async function renderOne(root, id) {
  clear(root).append(h("h1", {}, "Request"), h("p", { class: "dim loading" }, "Loading\u2026"));
  let r;
  try {
    r = await api("GET", `/admin/requests/${encodeURIComponent(id)}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      clear(root).append(h("h1", {}, "Request"), h("p", { class: "error" }, `No request ${id} in the log.`));
      return;
    }
    throw error;
  }
  const metadata = Object.entries(r.metadata || {});
  const guardrails = r.guardrails || [];
  clear(root).append(
    h("h1", {}, "Request ", h("code", { id: "request-id" }, r.id)),
    h("p", {}, h("a", { href: "#/requests" }, "\u2190 Request log")),
    h("div", { class: "panel" }, h("dl", { class: "record", id: "request-detail" },
      entry("Time (UTC)", when(r.ts)),
      entry("Status", statusCell(r.status, r.error)),
      entry("Error code", r.error),
      entry("Trace id", filterLink("trace_id", r.trace_id)),
      entry("Key", filterLink("key", r.key)),
      entry("Virtual key", r.virtual_key),
      entry("Team", filterLink("team", r.team)),
      entry("API", r.api),
      entry("Model asked", filterLink("model", r.model)),
      entry("Deployment", filterLink("deployment", r.deployment)),
      entry("Provider", r.provider),
      entry("Attempts", r.attempts === undefined ? null : String(r.attempts)),
      entry("Stream", r.stream === undefined || r.stream === null ? null : r.stream ? "yes" : "no"),
      entry("Cache", r.cache),
      entry("Prompt tokens", int(r.prompt_tokens)),
      entry("Completion tokens", int(r.completion_tokens)),
      entry("Cost", usd(r.cost_usd)),
      entry("Latency", ms(r.latency_ms)),
      entry("Time to first token", ms(r.ttft_ms)),
      entry("Client", r.client),
    )),
    h("h2", {}, "Metadata"),
    table([{ label: "Name", cell: (m) => m[0] }, { label: "Value", cell: (m) => String(m[1]) }], metadata, "No metadata."),
    h("h2", {}, "Guardrails"),
    table(["policy", "stage", "check", "verdict"].map((k) => ({ label: k, cell: (g) => g[k] ?? "\u2013" })), guardrails,
      "No guardrail ran."),
    h("h2", {}, "Prompt"),
    r.prompt === null || r.prompt === undefined
      ? h("p", { class: "dim" }, "Not stored (a policy turns prompt storage on).")
      : h("pre", { class: "body", id: "request-prompt" }, r.prompt),
    h("h2", {}, "Response"),
    r.response === null || r.response === undefined
      ? h("p", { class: "dim" }, "Not stored.")
      : h("pre", { class: "body", id: "request-response" }, r.response),
  );
}
