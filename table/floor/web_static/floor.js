"use strict";
// The floor page: tables (no money), then behind sign-in the report, fluctuations and alarms.
const $ = (id) => document.getElementById(id);
const money = (cents) => {
  const v = (cents || 0) / 100;
  return (v < 0 ? "-$" : "$") + Math.abs(v).toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2});
};
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) { if (k === "class") e.className = v; else e.setAttribute(k, v); }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
function figures(label, f) {
  const dl = el("dl", {});
  dl.append(el("dt", {}, label + " win"), el("dd", {class: f.win_cents < 0 ? "neg" : ""}, money(f.win_cents)));
  dl.append(el("dt", {}, "rounds"), el("dd", {}, f.rounds));
  return dl;
}
async function api(path, opts) {
  const r = await fetch(path, Object.assign({credentials: "same-origin", headers: {"Content-Type": "application/json"}}, opts || {}));
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  return {status: r.status, body};
}
async function loadTables() {
  const {status, body} = await api("/api/v1/floor/tables");
  if (status !== 200) return;
  const ul = $("tables");
  ul.replaceChildren(...body.tables.map((t) => el("li", {"data-table": t.table_id, "data-state": t.online ? "online" : "offline"},
    el("div", {class: "name"}, t.table_id, " ",
       el("span", {class: "badge " + (t.online ? "online" : "offline")}, t.online ? "online" : "offline")),
    el("div", {class: "muted"}, (t.floor ? "pit " + t.floor + " · " : "") + "checkpoint " + (t.notary_seq ?? "none") +
       " · alarms " + t.alarms),
    // when the floor learned it (its own clock: the table cannot say when it died) and how
    t.offline_since ? el("div", {class: "muted offline-why"}, "offline since " + t.offline_since +
       " (the floor's time) · " + t.offline_why) : "")));
  $("tables-empty").hidden = body.tables.length > 0;
}
let reportAsked = 0;  // the newest report asked for: a slower answer to an older ask is dropped
async function loadReport() {
  const ask = ++reportAsked;
  const day = $("day").value;
  $("export-csv").href = "/api/v1/floor/report?format=csv&day=" + encodeURIComponent(day);
  $("export-json").href = "/api/v1/floor/report?format=download&day=" + encodeURIComponent(day);
  const {status, body} = await api("/api/v1/floor/report?day=" + encodeURIComponent(day));
  if (ask !== reportAsked) return;  // the person asked for another day meanwhile
  if (status === 401) { signedOut(); return; }
  if (status !== 200) return;
  if (!$("day").value) $("day").value = body.gaming_day;
  const t = body.totals;
  $("totals").replaceChildren(el("div", {class: "name"},
    (body.scope && !body.scope.whole_floor ? "Pit " + body.scope.pits.join(", ") : "Floor") + ", gaming day " + body.gaming_day),
    figures("Day", t.day), figures("Month to date", t.month_to_date), figures("Year to date", t.year_to_date));
  $("rows").replaceChildren(...body.rows.map((r) => el("li", {"data-table": r.table_id},
    el("div", {class: "name"}, r.table_id + " · " + r.game.replaceAll("_", " ")),
    figures("Day", r.day), figures("Month to date", r.month_to_date), figures("Year to date", r.year_to_date))));
  $("fluctuations").replaceChildren(...body.fluctuations.map(fluctuation));
  $("fluct-empty").hidden = body.fluctuations.length > 0;
  const a = await api("/api/v1/floor/alarms");
  if (ask !== reportAsked) return;
  if (a.status === 200) {
    $("alarms").replaceChildren(...a.body.alarms.map((x) => el("li", {},
      el("div", {class: "name"}, (x.table_id || "floor") + " · " + x.kind), el("div", {}, x.text),
      el("div", {class: "muted"}, x.ts))));
    $("alarms-empty").hidden = a.body.alarms.length > 0;
    // the floor's own record (its signed notes), checked at this ask: an edit is shown above the alarms
    const rec = a.body.record || {holds: true, problems: []};
    $("record-broken").hidden = rec.holds;
    $("record-broken").replaceChildren(el("strong", {}, "The floor's record was edited: "),
      ...rec.problems.map((p) => el("div", {}, p)));
  }
}
function fluctuation(f) {
  const li = el("li", {"data-fluctuation": f.table_id + "/" + f.gaming_day},
    el("div", {class: "name"}, f.table_id + " · " + f.gaming_day),
    el("div", {}, "win " + money(f.win_cents) + ", expected " + money(f.expected_cents) + " (z " + f.z + ", " + f.rounds + " rounds)"));
  for (const n of f.notes) li.append(el("div", {class: "note"}, n.text, el("div", {class: "muted"}, n.author + " (" + n.role + ") " + n.ts)));
  const text = el("textarea", {rows: "2", "aria-label": "investigation note", maxlength: "2000"});
  const error = el("div", {class: "error", role: "alert"});
  const form = el("form", {}, el("label", {}, "Investigation note", text), el("button", {type: "submit"}, "Add note"), error);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const r = await api("/api/v1/floor/notes", {method: "POST", body: JSON.stringify({table_id: f.table_id, gaming_day: f.gaming_day, text: text.value})});
    if (r.status === 200) loadReport();
    else if (r.status === 401) signedOut();
    else error.textContent = (r.body && r.body.error) || ("the note was not saved (HTTP " + r.status + ")");
  });
  li.append(form);
  return li;
}
function signedIn(who) {
  // the floor's gaming day (its time zone and start hour), not this browser's calendar date
  if (!$("day").value && who.gaming_day) $("day").value = who.gaming_day;
  $("who").textContent = who.person + " (" + who.role.replaceAll("_", " ") + ")";
  $("scope").textContent = who.pits ? "Pits " + who.pits.join(", ") + " only" : "The whole floor";
  $("signin").hidden = true;
  $("reports").hidden = false;
  loadReport();
}
function signedOut() {
  $("who").textContent = "";
  $("day").value = "";  // the next person's default is the floor's day as the server says then
  $("signin").hidden = false;
  $("reports").hidden = true;
}
document.addEventListener("DOMContentLoaded", async () => {
  loadTables();
  setInterval(loadTables, 2000);  // a crash shows within 5 s of it (docs/integration.md)
  const me = await api("/api/v1/floor/session");
  if (me.status === 200) signedIn(me.body); else signedOut();
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const r = await api("/api/v1/floor/session", {method: "POST", body: JSON.stringify({person: $("person").value, pin: $("pin").value})});
    $("pin").value = "";
    if (r.status === 200) { $("signin-error").textContent = ""; signedIn(r.body); }
    else $("signin-error").textContent = (r.body && r.body.error) || "sign-in refused";
  });
  $("day-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadReport(); });
  $("signout").addEventListener("click", async () => { await api("/api/v1/floor/session", {method: "DELETE"}); signedOut(); });
});
