// Deployments: state, circuit, and why one cannot serve (GET /admin/deployments, /ready's words).

import { api } from "./api.js";
import { clear, h, int, ms, table } from "./dom.js";

const STATES = {
  ready: ["ready", "status-ok"],
  half_open: ["half-open (probing)", "status-warn"],
  circuit_open: ["circuit open", "status-bad"],
  unavailable: ["unavailable", "status-bad"],
};

function state(d) {
  const [words, cls] = STATES[d.state] || [d.state, "status-warn"];
  return h("span", { class: `status ${cls}` }, words);
}

export async function render(root) {
  clear(root).append(h("h1", {}, "Deployments"), h("p", { class: "dim loading" }, "Loading\u2026"));
  const report = await api("GET", "/admin/deployments");
  clear(root).append(
    h("h1", {}, "Deployments"),
    h("p", { id: "gateway-state" }, `Gateway: ${report.status}; Redis: ${report.redis}; config: ${report.config}`),
    table([
      { label: "Name", cell: (d) => h("span", { class: "deployment-name" }, d.name) },
      { label: "State", cell: state },
      { label: "Why", cell: (d) => d.reason || "\u2013" },
      { label: "Provider", cell: (d) => d.provider },
      { label: "APIs", cell: (d) => d.apis.join(", ") },
      { label: "Tags", cell: (d) => d.tags.join(", ") || "\u2013" },
      { label: "Fallbacks", cell: (d) => d.fallbacks.join(", ") || "\u2013" },
      { label: "Retries", cell: (d) => int(d.retries), num: true },
      { label: "Timeout", cell: (d) => `${d.timeout_s} s`, num: true },
      { label: "In flight", cell: (d) => int(d.in_flight), num: true },
      { label: "Latency (avg)", cell: (d) => ms(d.latency_ms), num: true },
    ], report.data, "No deployments configured."),
    h("p", { class: "dim" }, "Circuits and load as this worker sees them; /ready and /dashboard show the same states."),
  );
  root.querySelector("table").id = "deployments-table";
}
