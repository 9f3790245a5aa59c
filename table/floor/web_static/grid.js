"use strict";
// The pit grid's tiles, shared by the floor page (signed in) and the pit's read-only wall page:
// one tile per table, its state, round step, what it waits for, devices and alarms; no money.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) { if (v === undefined || v === null) continue; if (k === "class") e.className = v; else e.setAttribute(k, v); }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
function devices(d) {
  return Object.entries(d || {}).map(([name, l]) => el("span", {class: "dev " + (l.up ? "up" : "down"), title: name + ": " + (l.state || (l.up ? "up" : "down"))},
    (name === "shuffler" ? "shuffler" : "shoe") + (l.up ? " up" : " DOWN")));
}
function attention(t) { return t.state !== "online" || t.alarms > 0 || (t.table_alarms || []).length > 0; }
function tile(t, href) {
  const step = t.round ? "round " + (t.round.number ?? "?") + " · " + (t.round.step || "") : (t.state === "online" ? "between rounds" : "");
  // the floor's alarm rows of the table (its status's alarms are among them)
  const alarmCount = Math.max(t.alarms, (t.table_alarms || []).length);
  const a = el(href === null ? "div" : "a", {href: href === null ? undefined : "#table/" + encodeURIComponent(t.table_id), class: "tile " + t.state.replace(" ", "-")},
    el("span", {class: "tid"}, t.table_id),
    el("span", {class: "badge " + t.state.replace(" ", "-")}, t.state),
    alarmCount ? el("span", {class: "badge alarmed", title: (t.table_alarms || []).map((x) => x.text).join("\n")}, "alarms " + alarmCount) : "",
    el("span", {class: "step"}, step),
    t.waiting_for ? el("span", {class: "waits", title: t.waiting_for}, "waits: " + t.waiting_for) : "",
    // offline: since when (the floor's time, its zone; the date in the tooltip) and how, in short
    t.state === "offline" ? el("span", {class: "waits", title: (t.offline_since_at || t.offline_since) + " · " + t.offline_why},
      "since " + String(t.offline_since_at || t.offline_since).replace(/^\d{4}-\d\d-\d\d /, "")) : "",
    t.state === "offline" ? el("span", {class: "waits offline-why", title: t.offline_why}, t.offline_why.split(":")[0]) : "",
    el("span", {class: "devs"}, ...devices(t.devices)));
  return el("li", {"data-grid-table": t.table_id, "data-state": t.state, "data-pit": t.pit || ""}, a);
}
