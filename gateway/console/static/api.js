// The admin API, with the session cookie (sent by the browser, never readable here) and the
// session's CSRF token on every change.

export const session = { csrf: "", role: "", name: "", onSignedOut: () => {} };

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["x-gateway-csrf"] = session.csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    cache: "no-store",
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    if (response.status === 401 && path !== "/admin/session") session.onSignedOut();
    throw new ApiError(response.status, error.code || null, error.message || `HTTP ${response.status}`);
  }
  return data;
}

export function signedIn(answer) {
  session.csrf = answer.csrf_token;
  session.role = answer.role;
  session.name = answer.name;
}
