// Spend by key, team, deployment, model or day (GET /admin/requests/spend): a chart, a table, a CSV.

import { api } from "./api.js";
import { barList } from "./charts.js";
import { clear, go, field, h, int, query, select, table, usd } from "./dom.js";
import { rangeOptions, span } from "./ranges.js";

const GROUPS = [["key", "Key"], ["team", "Team"], ["deployment", "Deployment"], ["model", "Model"], ["day", "Day"]];

export async function render(root, params) {
  const groupBy = params.get("group_by") || "key";
  const range = params.get("range") || "30d";
  const group = select("spend-group", GROUPS, groupBy);
  const picker = select("spend-range", rangeOptions(), range);
  const go = () => {
    go(`#/spend${query({ group_by: group.value, range: picker.value })}`);
  };
  group.addEventListener("change", go);
  picker.addEventListener("change", go);
  const { since, until } = span(range);
  const filters = { group_by: groupBy, since, until };
  const csv = h("a", { id: "spend-csv", href: `/admin/requests/spend${query({ ...filters, format: "csv" })}`, download: `spend-by-${groupBy}.csv` }, "Download CSV");
  const body = h("div", {}, h("p", { class: "dim loading" }, "Loading\u2026"));
  clear(root).append(h("h1", {}, "Spend"),
    h("div", { class: "panel form-grid" }, field("Group by", group), field("Time range", picker), h("div", {}, csv)), body);
  const spend = await api("GET", `/admin/requests/spend${query(filters)}`);
  const rows = [...spend.data].sort((a, b) => (groupBy === "day" ? String(a.group).localeCompare(String(b.group)) : b.cost_usd - a.cost_usd));
  const label = (g) => (g === null || g === undefined || g === "" ? "(none)" : String(g));
  clear(body).append(
    barList({
      id: "spend-chart",
      title: `Cost by ${groupBy} (USD)`,
      rows: rows.map((r) => ({ label: label(r.group), value: r.cost_usd || 0, text: `${usd(r.cost_usd)}, ${int(r.requests)} req` })),
    }),
    h("h2", {}, "Table"),
    table([
      { label: GROUPS.find((g) => g[0] === groupBy)[1], cell: (r) => label(r.group), cls: "clip" },
      { label: "Requests", cell: (r) => int(r.requests), num: true },
      { label: "Prompt tokens", cell: (r) => int(r.prompt_tokens), num: true },
      { label: "Completion tokens", cell: (r) => int(r.completion_tokens), num: true },
      { label: "Cost", cell: (r) => usd(r.cost_usd), num: true },
    ], rows, "Nothing spent in this time range."),
  );
}
