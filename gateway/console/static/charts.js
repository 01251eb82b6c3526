// Charts drawn as SVG here (no library, no CDN). Series differ by pattern (solid, hatched, dashed,
// dotted) and are named in a legend, so they read without colour.

import { h, s } from "./dom.js";

const W = 560;
const H = 200;
const M = { left: 64, right: 12, top: 10, bottom: 26 };
let patterns = 0;

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

function clock(t, long) {
  const iso = new Date(t).toISOString();
  return long ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16);
}

function look(serie) {
  if (serie.kind === "bar") return serie.style ? "hatched bars" : "solid bars";
  return `${["solid", "dashed", "dotted"][serie.style || 0]} line`;
}

function sample(serie, pattern) {
  const svg = s("svg", { viewBox: "0 0 28 10", "aria-hidden": "true" });
  if (serie.kind === "bar") {
    svg.append(s("rect", { x: 0, y: 1, width: 28, height: 8, class: serie.style ? "hatched" : "bar-0", fill: serie.style ? `url(#${pattern})` : undefined }));
  } else {
    svg.append(s("line", { x1: 0, y1: 5, x2: 28, y2: 5, class: `line dash-${serie.style || 0}` }));
  }
  return svg;
}

/**
 * Values over time: `buckets` [{start, KEY...}] of `bucketS` seconds; `series` [{key, label, kind:
 * "bar" | "line", style: 0 solid | 1 hatched or dashed | 2 dotted}]; `format` a value's words.
 */
export function timeChart({ title, buckets, bucketS, series, format, id }) {
  const figure = h("figure", { id }, h("figcaption", {}, title));
  if (!buckets.length) {
    figure.append(h("p", { class: "dim" }, "No requests in this time range."));
    return figure;
  }
  const times = buckets.map((b) => new Date(b.start).getTime());
  const step = bucketS * 1000;
  const t0 = Math.min(...times);
  const t1 = Math.max(...times) + step;
  const values = series.flatMap((serie) => buckets.map((b) => b[serie.key]).filter((v) => typeof v === "number"));
  const top = niceMax(Math.max(0, ...values));
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const x = (t) => M.left + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v) => M.top + plotH - (v / top) * plotH;
  const pattern = `hatch-${++patterns}`;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  svg.append(
    s("defs", {}, s("pattern", { id: pattern, width: 5, height: 5, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      s("line", { x1: 0, y1: 0, x2: 0, y2: 5, class: "hatch-line" }))),
  );
  for (const v of [0, top / 2, top]) {
    svg.append(s("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: "axis" }));
    svg.append(s("text", { x: M.left - 6, y: y(v) + 4, "text-anchor": "end" }, format(v)));
  }
  const long = t1 - t0 > 36 * 3600 * 1000;
  for (const t of [t0, (t0 + t1) / 2, t1]) {
    svg.append(s("text", { x: x(t), y: H - 8, "text-anchor": t === t0 ? "start" : t === t1 ? "end" : "middle" }, clock(t, long)));
  }
  const width = Math.max(1, (step / (t1 - t0)) * plotW - 1);
  for (const serie of series) {
    if (serie.kind === "bar") {
      buckets.forEach((b, i) => {
        const v = b[serie.key] || 0;
        const rect = s("rect", {
          x: x(times[i]), y: y(v), width, height: Math.max(0, y(0) - y(v)),
          class: serie.style ? "hatched" : "bar-0", fill: serie.style ? `url(#${pattern})` : undefined,
        }, s("title", {}, `${clock(times[i], true)} ${serie.label}: ${format(v)}`));
        svg.append(rect);
      });
    } else {
      let d = "";
      let pen = false; // a bucket without a value (no successful request) breaks the line
      buckets.forEach((b, i) => {
        const v = b[serie.key];
        if (typeof v !== "number") {
          pen = false;
          return;
        }
        d += `${pen ? "L" : "M"}${(x(times[i]) + width / 2).toFixed(1)},${y(v).toFixed(1)} `;
        pen = true;
      });
      svg.append(s("path", { d: d.trim(), class: `line dash-${serie.style || 0}` }));
    }
  }
  figure.append(svg);
  const legend = h("ul", { class: "legend" });
  for (const serie of series) {
    const numbers = buckets.map((b) => b[serie.key]).filter((v) => typeof v === "number");
    const summary = serie.kind === "bar"
      ? `total ${format(numbers.reduce((a, b) => a + b, 0))}`
      : `highest ${numbers.length ? format(Math.max(...numbers)) : "\u2013"}`;
    legend.append(h("li", {}, sample(serie, pattern), `${serie.label} (${look(serie)}): ${summary}`));
  }
  figure.append(legend);
  return figure;
}

/** One horizontal bar per row: [{label, value, text}], the label and the value written beside it. */
export function barList({ title, rows, id }) {
  const figure = h("figure", { id }, h("figcaption", {}, title));
  if (!rows.length) {
    figure.append(h("p", { class: "dim" }, "Nothing spent in this time range."));
    return figure;
  }
  const width = 1000;
  const rowH = 24;
  const labelW = 260;
  const valueW = 180;
  const height = rows.length * rowH + 8;
  const top = Math.max(...rows.map((r) => r.value), 0) || 1;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  rows.forEach((row, i) => {
    const yTop = 4 + i * rowH;
    const short = row.label.length > 34 ? `${row.label.slice(0, 33)}\u2026` : row.label;
    const barW = Math.max(1, (row.value / top) * (width - labelW - valueW - 16));
    svg.append(
      s("g", { class: "spend-row", "data-group": row.label },
        s("title", {}, `${row.label}: ${row.text}`),
        s("text", { x: 0, y: yTop + 15, class: "label" }, short),
        s("rect", { x: labelW, y: yTop + 3, width: barW, height: rowH - 8, class: "spend" }),
        s("text", { x: labelW + barW + 6, y: yTop + 15, class: "value" }, row.text)),
    );
  });
  figure.append(svg);
  return figure;
}
