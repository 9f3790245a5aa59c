"use strict";
// The floor page: before sign-in the table list (no money); signed in, the grid of every table
// in the person's pits (state, round step, what it waits for, devices, alarms), a table's rounds
// and day figures one click away (#table/ID), the report with its 95 % band, and the alarms.
const $ = (id) => document.getElementById(id);
const money = (cents) => {
  const v = (cents || 0) / 100;
  return (v < 0 ? "-$" : "$") + Math.abs(v).toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2});
};
function figures(label, f) {
  const dl = el("dl", {});
  dl.append(el("dt", {}, label + " win"), el("dd", {class: f.win_cents < 0 ? "neg" : ""}, money(f.win_cents)));
  dl.append(el("dt", {}, "rounds"), el("dd", {}, f.rounds));
  return dl;
}
/** The floor's answer {status, body}; status 0 with body.error when the floor does not answer at all. */
async function api(path, opts) {
  let r;
  try {
    r = await fetch(path, Object.assign({credentials: "same-origin", headers: {"Content-Type": "application/json"}}, opts || {}));
  } catch (e) {
    return {status: 0, body: {error: "the floor does not answer"}};
  }
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  return {status: r.status, body};
}
// The polled lists draw the newest answer they have: an answer to an older ask that arrives after
// a newer one's (a slow request under load) is dropped instead of putting the older state back.
const polls = {tables: {asked: 0, drawn: 0}, grid: {asked: 0, drawn: 0}};
function newest(poll, ask) {
  if (ask < poll.drawn) return false;
  poll.drawn = ask;
  return true;
}
async function loadTables() {
  const ask = ++polls.tables.asked;
  const {status, body} = await api("/api/v1/floor/tables");
  if (status !== 200) {  // the list stays as last read, said to be so
    if (ask < polls.tables.drawn) return;
    $("tables-error").textContent = (status ? "the floor cannot be read now (HTTP " + status + ")" : "the floor does not answer") +
      "; the list is as last read; trying again";
    $("tables-error").hidden = false;
    return;
  }
  if (!newest(polls.tables, ask)) return;
  $("tables-error").hidden = true;
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
  if (status !== 200) {  // said beside the form; what is shown stays as last read
    $("report-error").textContent = "The report was not read: " + ((body && body.error) || "HTTP " + status) +
      "; what is shown is as last read";
    return;
  }
  $("report-error").textContent = "";
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
  loadFigures(ask);
  const a = await api("/api/v1/floor/alarms");
  if (ask !== reportAsked) return;
  if (a.status === 200) {
    $("alarms").replaceChildren(...a.body.alarms.map((x) => el("li", {},
      el("div", {class: "name"}, (x.table_id || "floor") + " · " + x.kind), el("div", {}, x.text),
      el("div", {class: "muted", title: x.ts}, x.at || x.ts))));
    $("alarms-empty").hidden = a.body.alarms.length > 0;
    // the floor's own record (its signed notes), checked at this ask: an edit is shown above the alarms
    const rec = a.body.record || {holds: true, problems: []};
    $("record-broken").hidden = rec.holds;
    $("record-broken").replaceChildren(el("strong", {}, "The floor's record was edited: "),
      ...rec.problems.map((p) => el("div", {}, p)));
  }
}
// -- figures with the 95 % band, and the plot (inline SVG) ----------------------------------------
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function bandText(f) {
  if (f.expected_cents === null) return "no band yet (fewer than the year's minimum rounds)";
  return "expected " + money(f.expected_cents) + " ± " + money(f.band_cents);
}
const PERIODS = [["day", "Day"], ["month_to_date", "Month to date"], ["year_to_date", "Year to date"]];
function bandTable(label, row, attrs) {
  const t = el("table", Object.assign({class: "band"}, attrs || {}), el("caption", {}, label));
  t.append(el("tr", {}, el("th", {}, ""), el("th", {}, "settled win"), el("th", {}, "expected, 95 % band"), el("th", {}, "rounds")));
  for (const [key, name] of PERIODS) {
    const f = row[key];
    t.append(el("tr", {class: f.outside ? "outside" : "", "data-period": key},
      el("th", {}, name), el("td", {class: f.win_cents < 0 ? "neg" : ""}, money(f.win_cents)),
      el("td", {}, bandText(f), f.outside ? el("strong", {}, " outside the band") : ""), el("td", {}, f.rounds)));
  }
  return t;
}
function plot(series) {
  const box = $("plot");
  box.replaceChildren();
  const W = 600, H = 260, L = 112, R = 10, T = 12, B = 34;
  const pts = series.filter((p) => p.expected_cents !== null);
  const values = series.map((p) => p.win_cents).concat(pts.flatMap((p) => [p.expected_cents + p.band_cents, p.expected_cents - p.band_cents]), [0]);
  let lo = Math.min(...values), hi = Math.max(...values);
  if (hi === lo) { hi += 100; lo -= 100; }
  const x = (i) => L + (series.length > 1 ? i * (W - L - R) / (series.length - 1) : (W - L - R) / 2);
  const y = (v) => T + (hi - v) * (H - T - B) / (hi - lo);
  box.append(svg("line", {x1: L, x2: W - R, y1: y(0), y2: y(0), class: "zero"}));
  if (pts.length === series.length && series.length) {
    const upper = series.map((p, i) => x(i) + "," + y(p.expected_cents + p.band_cents));
    const lower = series.map((p, i) => x(i) + "," + y(p.expected_cents - p.band_cents)).reverse();
    box.append(svg("polygon", {points: upper.concat(lower).join(" "), class: "band-area"}));
    box.append(svg("polyline", {points: series.map((p, i) => x(i) + "," + y(p.expected_cents)).join(" "), class: "expected"}));
  }
  box.append(svg("polyline", {points: series.map((p, i) => x(i) + "," + y(p.win_cents)).join(" "), class: "settled"}));
  box.append(svg("text", {x: L - 4, y: y(hi) + 16, "text-anchor": "end"}, money(hi)));
  box.append(svg("text", {x: L - 4, y: y(lo), "text-anchor": "end"}, money(lo)));
  if (series.length) {
    box.append(svg("text", {x: L, y: H - 8}, series[0].gaming_day));
    box.append(svg("text", {x: W - R, y: H - 8, "text-anchor": "end"}, series[series.length - 1].gaming_day));
  }
  const last = series[series.length - 1];
  $("plot-caption").textContent = last ? "Settled win (solid) against expected win (dashed) with its 95 % band (shaded), cumulative from " +
    series[0].gaming_day + ": " + money(last.win_cents) + " settled, " + (last.expected_cents === null ? "no band yet" : money(last.expected_cents) + " ± " + money(last.band_cents) + " expected") + "." : "";
}
async function loadFigures(ask) {
  const day = $("day").value;
  const r = await api("/api/v1/floor/figures?series=" + $("plot-span").value + (day ? "&day=" + encodeURIComponent(day) : ""));
  if (ask !== reportAsked || r.status !== 200) return;
  const b = r.body;
  plot(b.series);
  const scope = bandTable("Your view", b.scope, {"data-band": "scope"});
  const pits = b.pits.map((p) => bandTable("Pit " + (p.pit || "(none)"), p, {"data-band": "pit:" + (p.pit || "")}));
  const outside = b.tables.filter((t) => PERIODS.some(([k]) => t[k].outside));
  const perTable = el("details", {}, el("summary", {}, "Per table (" + b.tables.length + ", " + outside.length + " outside the band)"),
    ...b.tables.map((t) => bandTable(t.table_id, t, {"data-band": "table:" + t.table_id})));
  $("bands").replaceChildren(scope, ...pits, perTable);
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
// -- the grid -------------------------------------------------------------------------------------
const tiles = new Map();  // table id -> {key, li}: a tile is rebuilt only when its card changed
let gridTimer = null;
async function loadGrid() {
  const ask = ++polls.grid.asked, session = sessionChanges;
  const {status, body} = await api("/api/v1/floor/pit");
  if (session !== sessionChanges || !newest(polls.grid, ask)) return;  // asked before a sign-in or out, or older
  if (status === 401) { signedOut(); return; }
  if (status !== 200) {  // the tiles stay as last read, said to be so
    $("pit-counts").textContent = (status ? "the floor cannot be read now (HTTP " + status + ")" : "the floor does not answer") +
      "; the tiles are as last read; trying again";
    return;
  }
  const c = body.counts;
  $("pit-counts").textContent = c.tables + " tables: " + c.online + " online, " + c.offline + " offline, " + c.no_news +
    " no news, " + c.alarmed + " with alarms · " + (body.at || "") ;
  const sel = $("pit-filter"), chosen = sel.value;
  const have = [...sel.options].map((o) => o.value).slice(1).join();
  if (have !== body.pits.join()) {
    sel.replaceChildren(el("option", {value: ""}, "all in view"), ...body.pits.map((p) => el("option", {value: p}, p)));
    sel.value = body.pits.includes(chosen) ? chosen : "";
  }
  const ul = $("grid"), seen = new Set();
  let before = null;
  for (const t of body.tables) {
    seen.add(t.table_id);
    const key = JSON.stringify(t);
    let entry = tiles.get(t.table_id);
    if (!entry || entry.key !== key) {
      const li = tile(t);
      if (entry) entry.li.replaceWith(li);
      entry = {key, li, t};
      tiles.set(t.table_id, entry);
    }
    // in the server's order (pit, table)
    if (entry.li.parentNode !== ul || entry.li.previousSibling !== before) ul.insertBefore(entry.li, before ? before.nextSibling : ul.firstChild);
    before = entry.li;
  }
  for (const [id, entry] of tiles) if (!seen.has(id)) { entry.li.remove(); tiles.delete(id); }
  filterGrid();
  $("pit-empty").hidden = body.tables.length > 0;
}
function filterGrid() {
  const pit = $("pit-filter").value, find = $("pit-find").value.trim().toLowerCase(), only = $("pit-attention").checked;
  for (const {li, t} of tiles.values()) {
    li.hidden = (pit && t.pit !== pit) || (find && !t.table_id.toLowerCase().includes(find)) || (only && !attention(t));
  }
}
// -- one table -------------------------------------------------------------------------------------
let shownTable = null, oldestSeq = null, loadingOlder = false;
function roundItem(r) {
  const summary = el("summary", {}, "Round " + (r.number ?? "?") + " · " + r.state +
    (r.table_win_cents !== null ? " · table win " + money(r.table_win_cents) : "") + " · " + (r.opened_at || r.opened_ts));
  const dl = el("dl", {});
  dl.append(el("dt", {}, "round id"), el("dd", {}, r.round_id), el("dt", {}, "gaming day"), el("dd", {}, r.gaming_day),
    el("dt", {}, "opened"), el("dd", {}, r.opened_at || r.opened_ts), el("dt", {}, "settled"), el("dd", {}, r.settled_at || "not settled"),
    el("dt", {}, "wagered"), el("dd", {}, money(r.wagered_cents)));
  const inc = r.incidents.length ? el("ul", {class: "incidents"}, ...r.incidents.map((i) => el("li", {}, i.type.replaceAll("_", " ") + ": " + i.what + " (" + (i.at || i.ts) + ")")))
    : el("p", {class: "muted"}, "No incident on this round.");
  return el("li", {"data-round": r.round_id}, el("details", {}, summary, dl, inc));
}
async function loadTable(id, older, refresh) {
  // refresh: the card, day and alarms again (every 2 s); the rounds shown (and any opened) stay
  if (older && loadingOlder) return;  // a second press while the first page is asked would append it twice
  const q = older && oldestSeq !== null ? "?before=" + oldestSeq : "";
  if (older) { loadingOlder = true; $("rounds-more").disabled = true; }
  const session = sessionChanges;
  let answer;
  try {
    answer = await api("/api/v1/floor/table/" + encodeURIComponent(id) + q);
  } finally {
    if (older) { loadingOlder = false; $("rounds-more").disabled = false; }
  }
  const {status, body} = answer;
  if (id !== shownTable || session !== sessionChanges) return;  // another table, or asked for the person before
  if (status === 401) { signedOut(); return; }
  if (status !== 200) { $("table-card").replaceChildren(el("p", {class: "error"}, (body && body.error) || "HTTP " + status)); return; }
  const t = body.card;
  $("table-h").textContent = t.table_id + (t.pit ? " · pit " + t.pit : "");
  $("table-card").replaceChildren(el("div", {"data-state": t.state, id: "table-state"},
    el("span", {class: "badge " + t.state.replace(" ", "-")}, t.state), " ",
    t.round ? "round " + (t.round.number ?? "?") + " · " + (t.round.step || "") : ""),
    t.waiting_for ? el("div", {}, "waits for: " + t.waiting_for) : "",
    t.offline_why ? el("div", {class: "muted"}, "offline since " + (t.offline_since_at || t.offline_since) + " (the floor's time) · " + t.offline_why) : "",
    el("div", {class: "devs"}, ...devices(t.devices)),
    el("div", {class: "muted"}, "last heard " + (t.last_seen_at || "never")));
  const d = body.day;
  $("table-day").replaceChildren(el("div", {class: "name"}, "Gaming day " + d.gaming_day),
    figures("Day", {win_cents: d.win_cents, rounds: d.rounds}),
    el("dl", {}, el("dt", {}, "wagered"), el("dd", {}, money(d.wagered_cents)), el("dt", {}, "voided"), el("dd", {}, d.voided)));
  if (!older) {
    $("table-alarms").replaceChildren(...body.alarms.map((x) => el("li", {}, el("div", {class: "name"}, x.kind),
      el("div", {}, x.text), el("div", {class: "muted", title: x.ts}, x.at || x.ts))));
    $("table-alarms-empty").hidden = body.alarms.length > 0;
  }
  if (refresh) return;
  const list = $("round-list");
  if (!older) list.replaceChildren();
  list.append(...body.rounds.map(roundItem));
  oldestSeq = body.rounds.length ? body.rounds[body.rounds.length - 1].seq : oldestSeq;
  $("rounds-more").hidden = !body.more;
  $("rounds-empty").hidden = list.children.length > 0;
}
function route() {
  if ($("nav").hidden) return;  // signed out
  const m = /^#table\/(.+)$/.exec(location.hash);
  const id = m ? decodeURIComponent(m[1]) : null;
  $("table-view").hidden = !id;
  $("pit").hidden = !!id;
  $("reports").hidden = !!id;
  if (id && id !== shownTable) { shownTable = id; oldestSeq = null; $("round-list").replaceChildren(); $("table-h").textContent = id; loadTable(id, false); }
  if (!id) shownTable = null;
}
function signedIn(who) {
  // the floor's gaming day (its time zone and start hour), not this browser's calendar date
  if (!$("day").value && who.gaming_day) $("day").value = who.gaming_day;
  $("who").textContent = who.person + " (" + who.role.replaceAll("_", " ") + ")";
  $("scope").textContent = who.pits ? "Pits " + who.pits.join(", ") + " only" : "The whole floor";
  $("signin").hidden = true;
  $("tables-section").hidden = true;
  $("nav").hidden = false;
  $("reports").hidden = false;
  $("pit").hidden = false;
  loadReport();
  loadGrid();
  if (!gridTimer) gridTimer = setInterval(() => { if (!$("pit").hidden) loadGrid(); else if (shownTable) loadTable(shownTable, false, true); }, 2000);
  route();
}
function signedOut() {
  $("who").textContent = "";
  $("signout-error").textContent = "";
  $("report-error").textContent = "";
  $("day").value = "";  // the next person's default is the floor's day as the server says then
  $("signin").hidden = false;
  $("reports").hidden = true;
  $("nav").hidden = true;
  $("pit").hidden = true;
  $("table-view").hidden = true;
  $("tables-section").hidden = false;
  if (gridTimer) { clearInterval(gridTimer); gridTimer = null; }
  shownTable = null;
  oldestSeq = null;
  for (const {li} of tiles.values()) li.remove();
  tiles.clear();
  // nothing of this person stays drawn for the next: hidden is not gone (a section the next person
  // opens, or one their answer leaves as it was, showed it), and their answers still on the way are dropped
  reportAsked++;
  for (const id of ["totals", "rows", "fluctuations", "alarms", "bands", "plot", "record-broken", "table-card",
    "table-day", "round-list", "table-alarms", "pit-counts"]) $(id).replaceChildren();
  $("plot-caption").textContent = "";
  $("record-broken").hidden = true;
  $("rounds-more").hidden = true;
  $("pit-filter").replaceChildren(el("option", {value: ""}, "all in view"));
}
let sessionChanges = 0;  // sign-ins and sign-outs on this page: a slower "who is signed in" answer loses to them
document.addEventListener("DOMContentLoaded", async () => {
  // every listener first: a person who signs in while the page still asks who is signed in is heard
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // one sign-in at a time: a double tap sent two (a mistyped PIN counted twice toward the lock-out)
    const button = $("signin-form").querySelector("button[type=submit]");
    if (button.disabled) return;
    button.disabled = true;
    const pin = $("pin").value;
    $("pin").value = "";
    let r;
    try {
      r = await api("/api/v1/floor/session", {method: "POST", body: JSON.stringify({person: $("person").value, pin})});
    } finally {
      button.disabled = false;
    }
    if (r.status === 200) { sessionChanges++; $("signin-error").textContent = ""; signedIn(r.body); }
    else $("signin-error").textContent = r.status ? (r.body && r.body.error) || "sign-in refused"
      : "the floor does not answer: sign in again in a moment";
  });
  $("day-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadReport(); });
  $("plot-span").addEventListener("change", () => loadFigures(reportAsked));
  for (const id of ["pit-filter", "pit-find", "pit-attention"]) $(id).addEventListener("input", filterGrid);
  $("rounds-more").addEventListener("click", () => { if (shownTable) loadTable(shownTable, true); });
  window.addEventListener("hashchange", route);
  $("signout").addEventListener("click", async () => {
    // signed out only when the floor says so (or no longer knows the session): otherwise the page
    // would look signed out while the session lives on, and the next person to reload is this one
    $("signout-error").textContent = "";
    const r = await api("/api/v1/floor/session", {method: "DELETE"});
    if (r.status === 200 || r.status === 401) { sessionChanges++; signedOut(); return; }
    $("signout-error").textContent = "Not signed out: " + ((r.body && r.body.error) || "HTTP " + r.status) + "; sign out again";
  });
  $("signin-form").querySelector("button[type=submit]").disabled = false;
  loadTables();
  setInterval(() => { if (!$("tables-section").hidden) loadTables(); }, 2000);  // a crash shows within 5 s of it (docs/integration.md)
  const asked = sessionChanges;
  const me = await api("/api/v1/floor/session");
  if (sessionChanges !== asked) return;  // signed in or out on this page meanwhile: that is newer
  if (me.status === 200) signedIn(me.body); else signedOut();
});
