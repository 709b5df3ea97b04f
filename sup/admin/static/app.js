// SUP's admin page: reads /api/v1 with the token kept in this tab's sessionStorage. Every value from
// the API is written with textContent (never parsed as HTML): a display name is text, not markup.
//
// Built for many users: the list is one page from the server (search, filters and paging are the
// API's), its status one more request for the whole page; a person is read when opened; the plan and
// the gateway's sessions only when asked for. Writes (suspend, reactivate, reconcile, remove a key)
// ask for a confirmation first and are hidden from a viewer; the API decides who may (operator and
// above) and audits them.
"use strict";

const KEY = "sup-admin-token";
let pageSize = 50; // rows per page; #size=N in the address sets another (1 to 1000)
const $ = (id) => document.getElementById(id);
const list = { offset: 0, total: 0, query: {} };
let person = null; // the user shown in the person view, as the API last answered it
let pending = null; // the write waiting for its confirmation

function text(value) {
  return value === null || value === undefined ? "" : String(value);
}

function cell(value, className, detail) {
  const td = document.createElement("td");
  const span = document.createElement("span");
  span.textContent = text(value);
  if (className) span.className = className;
  td.appendChild(span);
  if (detail) {
    const small = document.createElement("span");
    small.className = "detail";
    small.textContent = text(detail);
    td.appendChild(small);
  }
  return td;
}

function buttonCell(label, className, onClick) {
  const td = document.createElement("td");
  const button = document.createElement("button");
  button.type = "button";
  button.className = className;
  button.textContent = text(label);
  button.addEventListener("click", onClick);
  td.appendChild(button);
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

async function api(path, options = {}) {
  const headers = { Authorization: "Bearer " + sessionStorage.getItem(KEY), Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET",
    headers: Object.assign(headers, options.headers || {}),
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    cache: "no-store",
  });
  if (!response.ok) {
    let detail = "";
    try { detail = (await response.json()).detail || ""; } catch (_) { /* not JSON */ }
    throw new Error(`${options.method || "GET"} ${path}: ${response.status} ${detail}`);
  }
  return response.status === 204 ? null : response.json();
}

const userPath = (name) => "/api/v1/users/" + encodeURIComponent(name);

// --- the list ------------------------------------------------------------------------------------

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

function readFilters() {
  const query = {};
  if ($("q").value.trim()) query.q = $("q").value.trim();
  if ($("f-status").value) query.active = $("f-status").value;
  if ($("f-source").value.trim()) query.source = $("f-source").value.trim();
  if ($("f-group").value.trim()) query.group = $("f-group").value.trim();
  return query;
}

// Searches may overlap (a filter changed while the last search is on its way): only the latest
// one's answer is shown, whichever arrives last.
let latestList = 0;

async function loadUsers() {
  const mine = ++latestList;
  const params = new URLSearchParams(Object.assign({ limit: pageSize, offset: list.offset }, list.query));
  const page = await api("/api/v1/users?" + params);
  let statuses = [];
  if (page.items.length > 0) {
    const names = new URLSearchParams(page.items.map((u) => ["username", u.username]));
    statuses = await api("/api/v1/status/users?" + names);
  }
  if (mine !== latestList) return;
  list.total = page.total;
  const byUser = Object.fromEntries(statuses.map((s) => [s.username, s]));
  const targets = statuses.length > 0 ? statuses[0].targets.map((t) => t.target) : [];
  targetColumns(targets);
  fill("users", page.items.map((user) => {
    const status = byUser[user.username] || { targets: [] };
    const byTarget = Object.fromEntries(status.targets.map((t) => [t.target, t]));
    return [
      buttonCell(user.username, "link open", () => showPerson(user.username)),
      cell(user.display_name),
      cell(user.email),
      cell(user.uid_number),
      cell(user.active ? "active" : "suspended", user.active ? "" : "suspended"),
      cell(user.source),
      ...targets.map((t) => {
        const s = byTarget[t] || { state: "unknown" };
        return cell(s.state, s.state, s.last_error);
      }),
    ];
  }));
  const last = Math.min(list.offset + page.items.length, page.total);
  $("user-count").textContent = `(${page.total})`;
  $("page-info").textContent = page.total === 0 ? "no users match" : `${list.offset + 1}-${last} of ${page.total}`;
  $("prev").disabled = list.offset === 0;
  $("next").disabled = last >= page.total;
}

// --- one person ----------------------------------------------------------------------------------

function identityRows(user) {
  const rows = [
    ["username", user.username], ["display name", user.display_name], ["e-mail", user.email],
    ["uid", user.uid_number], ["primary gid", user.primary_gid], ["home", user.home_directory],
    ["shell", user.login_shell], ["state", user.active ? "active" : "suspended"],
    ["suspended since", user.suspended_at], ["source", user.source], ["external id", user.external_id],
    ["Slurm default account", user.slurm_default_account], ["version", user.version],
    ["created", user.created_at], ["updated", user.updated_at],
  ];
  return rows.map(([name, value]) => [cell(name, "field"), cell(value)]);
}

async function showPerson(username) {
  $("error").textContent = "";
  $("action-result").textContent = "";
  hideConfirm();
  try {
    await loadPerson(username);
  } catch (error) {
    $("error").textContent = error.message;
  }
}

let latestPerson = 0; // as latestList: a person opened while another loads wins

async function loadPerson(username) {
  const mine = ++latestPerson;
  const path = userPath(username);
  const [user, keys, status, login, audit] = await Promise.all([
    api(path),
    api(path + "/ssh-keys"),
    api(path + "/status"),
    api("/api/v1/gateway/people/" + encodeURIComponent(username)),
    api("/api/v1/audit?" + new URLSearchParams({ resource_name: username, limit: 20 })),
  ]);
  if (mine !== latestPerson) return;
  person = user;
  $("person").hidden = false;
  $("person-name").textContent = user.username;
  fill("identity", identityRows(user));
  $("suspend").hidden = !user.active;
  $("reactivate").hidden = user.active;
  fill("keys", keys.map((k) => [
    cell(k.fingerprint),
    cell(k.origin),
    cell(k.key.split(" ").slice(2).join(" ")),
    buttonCell("Remove", "write remove-key", () => ask(
      `Remove key ${k.fingerprint} of ${user.username}?`,
      () => api(`${path}/ssh-keys/${encodeURIComponent(k.fingerprint)}`, { method: "DELETE" }),
      `key ${k.fingerprint} removed`,
    )),
  ]));
  $("groups").textContent = user.groups.length > 0 ? user.groups.join(", ") : "(none)";
  fill("person-status", status.targets.map((t) => [
    cell(t.target), cell(t.state, t.state, t.last_error), cell(t.updated_at), cell(t.attempts),
  ]));
  $("login-reason").textContent = login.reason ? `no login pod: ${login.reason}` : "";
  fill("login-pods", login.pods.map((p) => [cell(p.name), cell(p.kind), cell(p.awake ? "awake" : "asleep")]));
  fill("person-sessions", login.sessions.map((s) => [
    cell(`${s.kind}/${s.name}`), cell(s.since), cell(s.source), cell(s.gateway),
  ]));
  fill("person-audit", audit.items.map((e) => [cell(e.at), cell(e.actor), cell(e.action), cell(e.resource_type)]));
}

// --- writes: each one confirmed first, then the person, the list and the audit log read again ------

function ask(question, write, done) {
  pending = { write, done };
  $("confirm-text").textContent = question;
  $("confirm").hidden = false;
  $("action-result").textContent = "";
}

function hideConfirm() {
  pending = null;
  $("confirm").hidden = true;
}

async function confirmed() {
  const action = pending;
  hideConfirm();
  if (action === null) return;
  $("error").textContent = "";
  $("action-result").textContent = "working…";
  try {
    const answer = await action.write();
    $("action-result").textContent = typeof action.done === "function" ? action.done(answer) : action.done;
  } catch (error) {
    $("action-result").textContent = "";
    $("error").textContent = error.message;
    return;
  }
  try {
    if (person !== null) await loadPerson(person.username);
    await loadUsers();
    await loadAudit();
  } catch (error) {
    $("error").textContent = error.message;
  }
}

function setActive(active) {
  const user = person;
  ask(
    `${active ? "Reactivate" : "Suspend"} ${user.username}?`,
    () => api(userPath(user.username), {
      method: "PATCH", body: { active }, headers: { "If-Match": `"${user.version}"` },
    }),
    `${user.username} ${active ? "reactivated" : "suspended"}`,
  );
}

function reconcileNow() {
  ask(
    "Run a reconcile pass now (every enabled target, every user)?",
    () => api("/api/v1/reconcile", { method: "POST", body: {} }),
    (pass) => {
      const changes = pass.targets.reduce((sum, t) => sum + t.changes, 0);
      const states = pass.targets.map((t) => `${t.target}: ${t.state}`).join(", ");
      return `reconcile pass of ${pass.started_at} done: ${changes} changes (${states})`;
    },
  );
}

// --- on demand: the plan and the gateway's sessions ----------------------------------------------

async function onDemand(work) {
  $("error").textContent = "";
  try {
    await work();
  } catch (error) {
    $("error").textContent = error.message;
  }
}

async function loadPlan() {
  $("plan-time").textContent = "planning…";
  const plan = await api("/api/v1/plan");
  fill("plan-targets", plan.targets.map((t) => [cell(t.target), cell(t.state, t.state), cell(t.changes), cell(t.error)]));
  fill("plan-changes", plan.changes.map((c) => [cell(c.target), cell(c.action), cell(c.kind), cell(c.name)]));
  $("plan-targets").hidden = false;
  $("plan-changes").hidden = false;
  $("plan-time").textContent = `made at ${plan.started_at}`;
}

// Who is connected through the SSH gateway now, from its replicas' latest heartbeats (an empty list
// on a site without the gateway).
async function loadSessions() {
  const sessions = await api("/api/v1/gateway/sessions");
  fill("sessions", sessions.map((s) => [cell(s.username), cell(`${s.kind}/${s.name}`), cell(s.since), cell(s.source), cell(s.gateway)]));
  $("sessions").hidden = false;
  $("session-count").textContent = `(${sessions.length})`;
}

async function loadAudit() {
  const page = await api("/api/v1/audit?limit=20");
  fill("audit", page.items.map((e) => [cell(e.at), cell(e.actor), cell(e.action), cell(e.resource_type), cell(e.resource_name)]));
}

// Who the token is: a viewer gets no write buttons (the API would refuse them anyway: 403).
async function loadIdentity() {
  const me = await api("/api/v1/whoami");
  $("whoami").textContent = `${me.name} (${me.role})`;
  document.body.classList.toggle("read-only", me.role !== "operator" && me.role !== "admin");
}

async function load() {
  $("error").textContent = "";
  $("status").textContent = "loading";
  try {
    await Promise.all([loadIdentity(), loadUsers()]);
    $("status").textContent = "loaded " + new Date().toISOString();
    await loadAudit();
  } catch (error) {
    $("error").textContent = error.message;
    $("status").textContent = "failed";
  }
}

function search() {
  list.query = readFilters();
  list.offset = 0;
  onDemand(async () => {
    $("status").textContent = "searching";
    await loadUsers();
    $("status").textContent = "loaded " + new Date().toISOString();
  });
}

function turn(delta) {
  list.offset = Math.max(0, list.offset + delta);
  onDemand(loadUsers);
}

document.addEventListener("DOMContentLoaded", () => {
  // A token may come in the URL fragment (#token=...): fragments are never sent to a server. Take it
  // and drop it from the address bar at once.
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    sessionStorage.setItem(KEY, fragment.get("token"));
    history.replaceState(null, "", location.pathname);
  }
  const size = Number(fragment.get("size"));
  if (Number.isInteger(size) && size >= 1 && size <= 1000) pageSize = size;
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("token").value);
    $("token").value = "";
    load();
  });
  $("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); location.reload(); });
  $("search").addEventListener("submit", (event) => { event.preventDefault(); search(); });
  $("f-status").addEventListener("change", search);
  $("prev").addEventListener("click", () => turn(-pageSize));
  $("next").addEventListener("click", () => turn(pageSize));
  $("suspend").addEventListener("click", () => setActive(false));
  $("reactivate").addEventListener("click", () => setActive(true));
  $("reconcile").addEventListener("click", reconcileNow);
  $("confirm-yes").addEventListener("click", confirmed);
  $("confirm-no").addEventListener("click", hideConfirm);
  $("show-plan").addEventListener("click", () => onDemand(loadPlan));
  $("show-sessions").addEventListener("click", () => onDemand(loadSessions));
  if (sessionStorage.getItem(KEY)) load();
});
