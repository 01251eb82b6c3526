// Keys and virtual keys: list, create (the value shown once), edit limits and budgets, rotate,
// revoke, and each key's usage against its budget.

import { api } from "./api.js";
import { clear, field, h, int, query, table, usd, when } from "./dom.js";
import { keyForm, readKeyForm } from "./keyform.js";

const DASH = "\u2013";

function limitsText(limits) {
  const parts = Object.entries(limits || {}).filter(([, v]) => v !== null && v !== undefined);
  return parts.length ? parts.map(([k, v]) => `${k} ${int(v)}`).join(", ") : "none";
}

function budgetText(budget) {
  if (!budget) return "none";
  const parts = [];
  if (budget.tokens) parts.push(`${int(budget.tokens)} tokens`);
  if (budget.cost_usd) parts.push(usd(budget.cost_usd));
  return `${parts.join(" or ")} per ${budget.period}${budget.timezone && budget.timezone !== "UTC" ? ` (${budget.timezone})` : ""}`;
}

function metadataText(metadata) {
  const parts = Object.entries(metadata || {});
  return parts.length ? parts.map(([k, v]) => `${k}=${v}`).join("; ") : DASH;
}

/** A button that asks again before it acts: no browser dialog. */
function confirmButton(label, id, act) {
  const button = h("button", { type: "button", class: "danger admin-only", id }, label);
  button.addEventListener("click", () => {
    if (button.dataset.armed) return act();
    button.dataset.armed = "1";
    button.textContent = `Confirm: ${label.toLowerCase()}`;
  });
  return button;
}

export async function render(root) {
  const notice = h("p", { class: "error", id: "keys-error", role: "alert" });
  const once = h("div", { id: "key-once" });
  const detail = h("div", { id: "key-detail" });
  const keysBox = h("div", { id: "keys-table" });
  const virtualBox = h("div", { id: "virtual-keys-table" });
  const guard = (work) => async (...args) => {
    notice.textContent = "";
    try {
      await work(...args);
    } catch (error) {
      notice.textContent = error.message;
    }
  };
  const showOnce = (title, value) => {
    clear(once).append(h("div", { class: "secret-once", role: "status" },
      h("strong", {}, title), h("p", {}, "Copy it now: it is shown this once, and never again."),
      h("code", { id: "new-key-value" }, value), " ",
      h("button", { type: "button", id: "new-key-dismiss", on: { click: () => clear(once) } }, "I have copied it")));
  };

  const usage = guard(async (record) => {
    const u = await api("GET", `/admin/keys/${encodeURIComponent(record.name)}/usage`);
    const budget = u.budget || {};
    const meter = (used, limit) => limit ? [h("meter", { min: 0, max: limit, value: Math.min(used, limit) }),
      ` ${Math.round((100 * used) / limit)} % used`] : " (no limit)";
    clear(detail).append(h("div", { class: "panel", id: "key-usage" },
      h("h2", {}, `Usage of ${record.name}`),
      h("p", {}, `Period ${u.period}: ${when(u.period_start)} to ${when(u.period_end)}`),
      h("p", { id: "usage-tokens" }, `Tokens: ${int(u.tokens)}${budget.tokens ? ` of ${int(budget.tokens)}` : ""}`, meter(u.tokens, budget.tokens)),
      h("p", { id: "usage-cost" }, `Cost: ${usd(u.cost_usd)}${budget.cost_usd ? ` of ${usd(budget.cost_usd)}` : ""}`, meter(u.cost_usd, budget.cost_usd)),
      h("p", {}, `Limits: ${limitsText(record.limits)}`)));
  });

  const edit = (record) => {
    const form = keyForm("edit", record);
    const save = h("button", { type: "submit", class: "primary", id: "edit-save" }, "Save");
    form.append(h("div", { class: "actions" }, save, h("button", { type: "button", on: { click: () => clear(detail) } }, "Cancel")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      guard(async () => {
        const { name, ...changes } = readKeyForm("edit", { clearing: true });
        await api("PATCH", `/admin/keys/${encodeURIComponent(record.name)}`, changes);
        clear(detail);
        await load();
      })();
    });
    clear(detail).append(h("div", { class: "panel", id: "key-edit" }, h("h2", {}, `Edit ${record.name}`), form));
  };

  const keyColumns = [
    { label: "Name", cell: (k) => h("span", { class: "key-name" }, k.name), cls: "clip" },
    { label: "Status", cell: (k) => h("span", { class: `status ${k.status === "active" ? "status-ok" : "status-bad"}` }, k.status) },
    { label: "Source", cell: (k) => k.source },
    { label: "Deployments", cell: (k) => (k.deployments || []).join(", "), cls: "clip" },
    { label: "Limits", cell: (k) => limitsText(k.limits) },
    { label: "Budget", cell: (k) => budgetText(k.budget) },
    { label: "Expires", cell: (k) => (k.expires_at ? when(k.expires_at) : "never") },
    { label: "Metadata", cell: (k) => metadataText(k.metadata), cls: "clip" },
    {
      label: "Actions",
      cell: (k) => {
        const writable = k.source === "redis" && k.status !== "revoked";
        const slug = encodeURIComponent(k.name);
        return h("div", { class: "actions", "data-key": k.name },
          h("button", { type: "button", on: { click: () => usage(k) } }, "Usage"),
          h("a", { href: `#/requests${query({ key: k.name })}` }, "Requests"),
          writable && h("button", { type: "button", class: "admin-only", on: { click: () => edit(k) } }, "Edit"),
          writable && h("button", { type: "button", class: "admin-only", on: { click: guard(async () => {
            const answer = await api("POST", `/admin/keys/${slug}/rotate`);
            showOnce(`New value of ${k.name}`, answer.key);
          }) } }, "Rotate"),
          writable && confirmButton("Revoke", undefined, guard(async () => {
            await api("POST", `/admin/keys/${slug}/revoke`);
            await load();
          })));
      },
    },
  ];
  const virtualColumns = [
    { label: "Name", cell: (v) => v.name, cls: "clip" },
    { label: "Provider", cell: (v) => v.provider ?? DASH },
    { label: "Source", cell: (v) => v.source },
    { label: "Status", cell: (v) => h("span", { class: `status ${v.revoked ? "status-bad" : "status-ok"}` }, v.revoked ? "revoked" : "active") },
    {
      label: "Actions",
      cell: (v) => {
        if (v.source !== "redis" || v.revoked) return DASH;
        const slug = encodeURIComponent(v.name);
        const secret = h("input", { type: "password", placeholder: "new credential", class: "admin-only", "aria-label": `New credential of ${v.name}` });
        return h("div", { class: "actions" }, secret,
          h("button", { type: "button", class: "admin-only", on: { click: guard(async () => {
            await api("POST", `/admin/virtual-keys/${slug}/rotate`, { api_key: secret.value });
            await load();
          }) } }, "Rotate"),
          confirmButton("Revoke", undefined, guard(async () => {
            await api("POST", `/admin/virtual-keys/${slug}/revoke`);
            await load();
          })));
      },
    },
  ];

  const load = async () => {
    const [keys, virtual] = await Promise.all([api("GET", "/admin/keys"), api("GET", "/admin/virtual-keys")]);
    clear(keysBox).append(table(keyColumns, keys.data, "No keys yet."));
    clear(virtualBox).append(table(virtualColumns, virtual.data, "No virtual keys."));
  };

  const create = keyForm("new");
  create.id = "key-create";
  create.append(h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "key-create-submit" }, "Create key")));
  create.addEventListener("submit", (event) => {
    event.preventDefault();
    guard(async () => {
      const answer = await api("POST", "/admin/keys", readKeyForm("new"));
      showOnce(`The new key ${answer.record.name}`, answer.key);
      create.reset();
      await load();
    })();
  });
  const vkName = h("input", { id: "vk-name" });
  const vkProvider = h("input", { id: "vk-provider", placeholder: "openai" });
  const vkSecret = h("input", { id: "vk-api-key", type: "password" });
  const vkForm = h("form", { id: "vk-create", class: "panel form-grid admin-only" },
    field("Name", vkName), field("Provider type", vkProvider), field("Credential", vkSecret, "wide"),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Add virtual key")));
  vkForm.addEventListener("submit", (event) => {
    event.preventDefault();
    guard(async () => {
      await api("POST", "/admin/virtual-keys", { name: vkName.value.trim(), provider: vkProvider.value.trim(), api_key: vkSecret.value });
      vkForm.reset();
      await load();
    })();
  });

  clear(root).append(
    h("h1", {}, "Keys"), notice, once, detail,
    h("h2", {}, "API keys"), keysBox,
    h("h2", { class: "admin-only" }, "New API key"), h("div", { class: "admin-only" }, create),
    h("h2", {}, "Virtual keys (provider credentials)"), virtualBox,
    h("h2", { class: "admin-only" }, "New virtual key"), vkForm,
  );
  await load();
}
