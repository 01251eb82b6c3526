// The form of an API key's policy, for creating one and for editing one (PATCH /admin/keys/NAME).

import { field, h } from "./dom.js";

const PERIODS = ["30d", "7d", "1d", "1h", "day", "week", "month"];

function localInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function value(id) {
  return document.getElementById(id).value.trim();
}

function number(id) {
  const text = value(id);
  return text === "" ? null : Number(text);
}

export function keyForm(prefix, record) {
  const r = record || {};
  const limits = r.limits || {};
  const budget = r.budget || {};
  const input = (name, props) => h("input", { id: `${prefix}-${name}`, ...props });
  const period = h("select", { id: `${prefix}-period` },
    PERIODS.map((p) => h("option", { value: p, selected: p === (budget.period || "30d") }, p)));
  return h(
    "form",
    { class: "panel form-grid", autocomplete: "off" },
    field("Name", input("name", { value: r.name || "", required: true, disabled: Boolean(record) })),
    field("Deployments (comma-separated, * for all)", input("deployments", { value: (r.deployments || ["*"]).join(", ") }), "wide"),
    field("Requests a minute (rpm)", input("rpm", { type: "number", min: 1, value: limits.rpm ?? "" })),
    field("Tokens a minute (tpm)", input("tpm", { type: "number", min: 1, value: limits.tpm ?? "" })),
    field("Concurrent requests", input("concurrent", { type: "number", min: 1, value: limits.concurrent ?? "" })),
    field("Budget: tokens", input("budget-tokens", { type: "number", min: 1, value: budget.tokens ?? "" })),
    field("Budget: USD", input("budget-usd", { type: "number", min: 0, step: "any", value: budget.cost_usd ?? "" })),
    field("Budget period", period),
    field("Expires (local time)", input("expires", { type: "datetime-local", value: localInput(r.expires_at), "data-was": localInput(r.expires_at) })),
    field("Metadata (one name=value a line)", h("textarea", { id: `${prefix}-metadata` },
      Object.entries(r.metadata || {}).map(([k, v]) => `${k}=${v}`).join("\n")), "full"),
  );
}

/** The body for POST /admin/keys, or (`clearing`) for PATCH, where an empty budget or expiry clears it. */
export function readKeyForm(prefix, { clearing = false } = {}) {
  const body = { name: value(`${prefix}-name`) };
  body.deployments = value(`${prefix}-deployments`).split(",").map((d) => d.trim()).filter(Boolean);
  const limits = {};
  for (const name of ["rpm", "tpm", "concurrent"]) {
    const n = number(`${prefix}-${name}`);
    if (n !== null) limits[name] = n;
  }
  body.limits = limits;
  const tokens = number(`${prefix}-budget-tokens`);
  const usd = number(`${prefix}-budget-usd`);
  if (tokens !== null || usd !== null) {
    body.budget = { period: value(`${prefix}-period`) };
    if (tokens !== null) body.budget.tokens = tokens;
    if (usd !== null) body.budget.cost_usd = usd;
  } else if (clearing) {
    body.budget = null;
  }
  const expires = value(`${prefix}-expires`);
  const unchanged = expires === document.getElementById(`${prefix}-expires`).dataset.was;
  if (clearing && unchanged) {
    // left as it was: not sent, so an expiry is not cut to the minute the input shows
  } else if (expires) body.expires_at = new Date(expires).toISOString();
  else if (clearing) body.expires_at = null;
  const metadata = {};
  for (const line of document.getElementById(`${prefix}-metadata`).value.split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) metadata[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  body.metadata = metadata;
  return body;
}
