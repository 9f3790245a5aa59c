// The pit view: every table of the pits, pushed by the pit server (tablectl pit serve) from
// the floor's MQTT brokers: the whole board once, then only the tables that changed.
// Online / offline / no news, held alarms and links carry words and shapes, never colour alone.

import { badge, clock, el, fill, money, stateWords } from "./ui.js";

const $ = (id) => document.getElementById(id);

function stateBadge(t) {
  if (t.state === "online") return badge("ok", "ONLINE");
  if (t.state === "offline") return badge("bad", "OFFLINE");
  return badge("off", "NO NEWS");
}

function tableCard(t) {
  const s = t.table || null;
  const alarms = (s && s.alarms) || [];
  const links = (s && s.links) || {};
  const linkWords = t.state === "online" ? "not reported" : "unknown while offline";
  const r = t.last_result;
  const cls = `pit-table${t.state !== "online" ? " offline" : ""}${alarms.length ? " alarm" : ""}`;
  return el("section", { class: cls, "data-table": t.table_id, "data-state": t.state, "aria-label": `Table ${t.table_id}` },
    el("h2", {}, `${t.table_id} `, stateBadge(t)),
    t.state === "offline" ? el("p", { class: "refused" }, `offline${t.offline_since ? ` since ${clock(t.offline_since)}` : ""}${t.offline_why ? `: ${t.offline_why}` : ""}`)
      : null,
    el("p", { class: "step", "data-step": "" }, s && s.round ? `Round ${s.round.number}: ${stateWords(s.round.state)}`
      : t.round ? `Round ${t.round.number}: ${t.round.step}` : "Between rounds",
    s && Number.isInteger(s.rounds_played) ? el("span", { class: "muted" }, ` (${s.rounds_played} played)`) : null),
    s && s.waiting_for ? el("p", { class: "waiting" }, `Waits for ${s.waiting_for}.`) : null,
    el("ul", { class: "alarms" }, alarms.map((a) => el("li", { class: "alarm", "data-alarm": a.kind },
      badge("bad", String(a.kind).replace(/_/g, " ").toUpperCase()), " ", a.text))),
    el("p", { class: "links" }, ["shuffler", "shoe"].map((n) => el("span", { "data-link": n }, `${n} `,
      !links[n] ? badge("off", linkWords) : links[n].up ? badge("ok", "up") : badge("bad", "DOWN"), " "))),
    el("p", { class: "result", "data-last-round": r ? r.number : "" }, r ? (r.voided
      ? `Last round ${r.number ?? ""}: voided (${r.reason || "no reason given"})`
      : `Last round ${r.number}: house ${money(r.house_cents, true)}; `
        + Object.entries(r.net_cents).map(([seat, c]) => `seat ${seat} ${money(c, true)}`).join(", "))
      : "No round result yet."));
}

// The board as the page holds it: a full frame replaces it, a delta frame replaces only
// the tables it carries (each card redrawn alone, in table order).
const cards = new Map();

function header(board) {
  fill($("pit-name"), `Pit ${board.pit}`);
  fill($("forged"), board.forged ? badge("bad", `${board.forged} forged message(s) dropped`) : "");
  fill($("updated"), `updated ${clock(board.ts)}`);
  fill($("brokers"), (board.brokers || []).map((b) => el("span", { "data-broker": b.broker },
    `broker ${b.broker} `, b.connected ? badge("ok", "connected") : badge("bad", "NOT CONNECTED"), " ")));
}

function refusedList(refused, limit) {
  const box = $("refused");
  box.hidden = !refused.length;
  fill(box, refused.length ? [
    el("h2", {}, badge("bad", "REFUSED"), ` ${refused.length} table(s) past this pit's limit of ${limit} tables`),
    el("p", { class: "muted" }, "Their messages are counted, not shown: raise --max-tables, or split the pit."),
    el("ul", {}, refused.map((r) => el("li", { "data-refused": r.table_id },
      `${r.table_id}: ${r.messages} message(s) refused`))),
  ] : []);
}

function place(t) {
  const node = tableCard(t);
  const old = cards.get(t.table_id);
  if (old) { old.replaceWith(node); cards.set(t.table_id, node); return; }
  const box = $("tables");
  const after = [...cards.keys()].filter((id) => id > t.table_id).sort()[0];
  box.insertBefore(node, after ? cards.get(after) : null);
  cards.set(t.table_id, node);
}

function render(frame) {
  header(frame);
  if (frame.type === "full") {
    cards.clear();
    const nodes = (frame.tables || []).map((t) => { const n = tableCard(t); cards.set(t.table_id, n); return n; });
    fill($("tables"), nodes);  // sorted by table id by the server
    if (!(frame.tables || []).length) fill($("tables"), el("p", { class: "muted" }, "No table in this pit."));
  } else {
    (frame.tables || []).forEach(place);
  }
  if (frame.refused) refusedList(frame.refused, frame.max_tables);
  $("tables").dataset.version = frame.version;
}

function connect(delay = 500) {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/v1/pit/ws`);
  ws.onopen = () => { fill($("connection"), badge("ok", "live")); $("connection").dataset.state = "live"; };
  ws.onmessage = (msg) => { try { render(JSON.parse(msg.data)); } catch { /* a bad frame is ignored */ } };
  ws.onclose = () => {
    fill($("connection"), badge("bad", "OFFLINE: reconnecting"));
    $("connection").dataset.state = "offline";
    setTimeout(() => connect(Math.min(delay * 2, 5000)), delay);
  };
}
connect();
