// The console's shell: sign-in, sign-out, and the page for the location's hash.

import { api, ApiError, session, signedIn } from "./api.js";
import { clear, h } from "./dom.js";
import * as deployments from "./deployments.js";
import * as keys from "./keys.js";
import * as overview from "./overview.js";
import * as requests from "./requests.js";
import * as spend from "./spend.js";

const PAGES = { overview, requests, keys, spend, deployments };
const $ = (id) => document.getElementById(id);

function showSignIn(message) {
  session.csrf = "";
  $("top").hidden = true;
  $("page").hidden = true;
  $("signin-page").hidden = false;
  $("signin-error").textContent = message || "";
  $("signin-key").focus();
}

function showConsole() {
  document.body.dataset.role = session.role;
  $("whoami").textContent = session.role === "admin" ? "Signed in: admin" : `Signed in: viewer ${session.name} (read-only)`;
  $("signin-page").hidden = true;
  $("top").hidden = false;
  $("page").hidden = false;
  route();
}

async function route() {
  if (!session.csrf) return;
  const [path, search] = (location.hash.slice(1) || "/overview").split("?");
  const [, name, rest] = path.split("/");
  const params = new URLSearchParams(search || "");
  const root = $("page");
  const notice = $("notice");
  notice.hidden = true;
  for (const link of document.querySelectorAll("header nav a")) {
    if (link.dataset.page === (name === "request" ? "requests" : name)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    if (name === "request") await requests.renderOne(root, decodeURIComponent(rest || ""));
    else await (PAGES[name] || overview).render(root, params);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return;
    notice.textContent = `${error.message}${error.code ? ` (${error.code})` : ""}`;
    notice.hidden = false;
    for (const loading of root.querySelectorAll(".loading")) loading.textContent = "This page could not load.";
    if (!root.children.length) root.append(h("p", { class: "dim" }, "This page could not load."));
  }
}

async function signIn(event) {
  event.preventDefault();
  const key = $("signin-key");
  try {
    signedIn(await api("POST", "/admin/session", { key: key.value }));
    key.value = "";
    showConsole();
  } catch (error) {
    key.value = "";
    showSignIn(error.status === 429 ? error.message : "That key is not the admin key or a viewer key.");
  }
}

async function signOut() {
  try {
    await api("DELETE", "/admin/session");
  } finally {
    clear($("page"));
    showSignIn("Signed out.");
  }
}

async function start() {
  session.onSignedOut = () => showSignIn("Your session has ended: sign in again.");
  $("signin").addEventListener("submit", signIn);
  $("signout").addEventListener("click", signOut);
  window.addEventListener("hashchange", route);
  try {
    signedIn(await api("GET", "/admin/session"));
    showConsole();
  } catch {
    showSignIn("");
  }
}

start();
