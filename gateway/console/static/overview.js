// Overview: requests, errors, latency p50/p95, tokens and cost over time, from /admin/requests/stats.

import { api } from "./api.js";
import { timeChart } from "./charts.js";
import { clear, go, field, h, int, ms, query, select, usd } from "./dom.js";
import { rangeOptions, span } from "./ranges.js";

function tile(label, value, id) {
  return h("div", { class: "tile" }, h("div", { class: "label" }, label), h("div", { class: "value", id }, value));
}

export async function render(root, params) {
  const range = params.get("range") || "24h";
  const picker = select("overview-range", rangeOptions(), range);
  picker.addEventListener("change", () => {
    go(`#/overview${query({ range: picker.value })}`);
  });
  const body = h("div", {}, h("p", { class: "dim loading" }, "Loading\u2026"));
  clear(root).append(h("h1", {}, "Overview"), h("div", { class: "form-grid" }, field("Time range", picker)), body);
  const { since, until, bucket } = span(range);
  const stats = await api("GET", `/admin/requests/stats${query({ since, until, bucket_s: bucket })}`);
  const buckets = [...stats.buckets].sort((a, b) => new Date(a.start) - new Date(b.start));
  for (const b of buckets) b.tokens = (b.prompt_tokens || 0) + (b.completion_tokens || 0);
  const sum = (key) => buckets.reduce((total, b) => total + (b[key] || 0), 0);
  const requests = sum("requests");
  const errors = sum("errors");
  const bucketS = stats.bucket_s || Number(bucket);
  clear(body).append(
    h(
      "div",
      { class: "tiles" },
      tile("Requests", int(requests), "total-requests"),
      tile("Errors", int(errors), "total-errors"),
      tile("Error rate", requests ? `${((100 * errors) / requests).toFixed(1)} %` : "\u2013", "error-rate"),
      tile("Prompt tokens", int(sum("prompt_tokens")), "total-prompt-tokens"),
      tile("Completion tokens", int(sum("completion_tokens")), "total-completion-tokens"),
      tile("Cost", usd(sum("cost_usd")), "total-cost"),
    ),
    h(
      "div",
      { class: "charts" },
      timeChart({
        id: "chart-requests", title: "Requests and errors", buckets, bucketS, format: int,
        series: [
          { key: "requests", label: "requests", kind: "bar", style: 0 },
          { key: "errors", label: "errors", kind: "bar", style: 1 },
        ],
      }),
      timeChart({
        id: "chart-latency", title: "Latency", buckets, bucketS, format: ms,
        series: [
          { key: "p50_ms", label: "p50", kind: "line", style: 0 },
          { key: "p95_ms", label: "p95", kind: "line", style: 1 },
        ],
      }),
      timeChart({
        id: "chart-tokens", title: "Tokens", buckets, bucketS, format: int,
        series: [
          { key: "prompt_tokens", label: "prompt", kind: "line", style: 0 },
          { key: "completion_tokens", label: "completion", kind: "line", style: 1 },
        ],
      }),
      timeChart({
        id: "chart-cost", title: "Cost (USD)", buckets, bucketS, format: usd,
        series: [{ key: "cost_usd", label: "cost", kind: "bar", style: 0 }],
      }),
    ),
  );
}
