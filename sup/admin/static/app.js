// SUP's admin page: reads /api/v1 with the token kept in this tab's sessionStorage. Every value from
// the API is written with textContent (never innerHTML): a display name is text, not markup.
"use strict";

const KEY = "sup-admin-token";
const $ = (id) => document.getElementById(id);

function cell(text, className, detail) {
  const td = document.createElement("td");
  const span = document.createElement("span");
  span.textContent = text === null || text === undefined ? "" : String(text);
  if (className) span.className = className;
  td.appendChild(span);
  if (detail) {
    const small = document.createElement("span");
    small.className = "detail";
    small.textContent = String(detail);
    td.appendChild(small);
  }
  return td;
}

function fill(tableId, rows) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    tr.append(...cells);
    return tr;
  }));
}

async function api(path) {
  const response = await fetch(path, {
    headers: { Authorization: "Bearer " + sessionStorage.getItem(KEY), Accept: "application/json" },
    cache: "no-store",
  });
  if (!response.ok) {
    let detail = "";
    try { detail = (await response.json()).detail || ""; } catch (_) { /* not JSON */ }
    throw new Error(`${path}: ${response.status} ${detail}`);
  }
  return response.json();
}

// One column per target, in the order the server lists them (SUP's target registry): the page names
// no target itself, so a new target shows up here without a change.
function targetColumns(names) {
  const head = $("users").tHead.rows[0];
  head.querySelectorAll("th.target").forEach((th) => th.remove());
  for (const name of names) {
    const th = document.createElement("th");
    th.className = "target";
    th.textContent = name;
    head.appendChild(th);
  }
}

async function loadUsers() {
  const page = await api("/api/v1/users?limit=200");
  const rows = [];
  let targets = null;
  for (const user of page.items) {
    const status = await api(`/api/v1/users/${encodeURIComponent(user.username)}/status`);
    if (targets === null) {
      targets = status.targets.map((t) => t.target);
      targetColumns(targets);
    }
    const byTarget = Object.fromEntries(status.targets.map((t) => [t.target, t]));
    rows.push([
      cell(user.username),
      cell(user.display_name),
      cell(user.uid_number),
      cell(user.active ? "active" : "suspended"),
      ...targets.map((t) => {
        const s = byTarget[t] || { state: "unknown" };
        return cell(s.state, s.state, s.last_error);
      }),
    ]);
  }
  fill("users", rows);
  $("user-count").textContent = `(${page.items.length}${page.total > page.items.length ? " of " + page.total : ""})`;
}

async function loadPlan() {
  const plan = await api("/api/v1/plan");
  fill("plan-targets", plan.targets.map((t) => [cell(t.target), cell(t.state, t.state), cell(t.changes), cell(t.error)]));
  fill("plan-changes", plan.changes.map((c) => [cell(c.target), cell(c.action), cell(c.kind), cell(c.name)]));
}

// Who is connected through the SSH gateway now, from its replicas' latest heartbeats (an empty list
// on a site without the gateway).
async function loadSessions() {
  const sessions = await api("/api/v1/gateway/sessions");
  fill("sessions", sessions.map((s) => [cell(s.username), cell(`${s.kind}/${s.name}`), cell(s.since), cell(s.source), cell(s.gateway)]));
  $("session-count").textContent = `(${sessions.length})`;
}

async function loadAudit() {
  const page = await api("/api/v1/audit?limit=50");
  fill("audit", page.items.map((e) => [cell(e.at), cell(e.actor), cell(e.action), cell(e.resource_type), cell(e.resource_name)]));
}

async function load() {
  $("error").textContent = "";
  $("status").textContent = "loading";
  try {
    await loadUsers();
    await loadPlan();
    await loadSessions();
    await loadAudit();
    $("status").textContent = "loaded " + new Date().toISOString();
  } catch (error) {
    $("error").textContent = error.message;
    $("status").textContent = "failed";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  // A token may come in the URL fragment (#token=...): fragments are never sent to a server. Take it
  // and drop it from the address bar at once.
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    sessionStorage.setItem(KEY, fragment.get("token"));
    history.replaceState(null, "", location.pathname);
  }
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("token").value);
    $("token").value = "";
    load();
  });
  $("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); location.reload(); });
  if (sessionStorage.getItem(KEY)) load();
});
