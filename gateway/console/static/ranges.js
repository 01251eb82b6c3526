// Time ranges the pages offer: [id, words, seconds, chart bucket seconds].

export const RANGES = [
  ["1h", "Last hour", 3600, 60],
  ["6h", "Last 6 hours", 6 * 3600, 300],
  ["24h", "Last 24 hours", 86400, 900],
  ["7d", "Last 7 days", 7 * 86400, 3600],
  ["30d", "Last 30 days", 30 * 86400, 86400],
];

/** {since, until, bucket} in epoch seconds for a range id (the last hour when unknown). */
export function span(id) {
  const [, , seconds, bucket] = RANGES.find((r) => r[0] === id) || RANGES[0];
  const until = Math.ceil(Date.now() / 1000) + 1;
  return { since: String(until - seconds), until: String(until), bucket: String(bucket) };
}

export function rangeOptions() {
  return RANGES.map(([id, words]) => [id, words]);
}
