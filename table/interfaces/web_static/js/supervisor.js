// The supervisor's screen: held rounds and incidents with what to do, void (a reason
// required; a second supervisor's confirmation when the two-person rule applies), a
// replacement deck, an unreadable card, releasing a hold, the audit status, and the
// shuffle check per deck as a chart. Every action is checked again by the table: an
// auditor sees this screen with its forms disabled, and the table refuses them anyway.

import { boot } from "./boot.js";
import { HistoryPanel } from "./history.js";
import { VERDICT_WORDS, shuffleChart } from "./chart.js";
import { SECOND_SUPERVISOR_ACTION, Status } from "./model.js";
import { renderAlarms, renderDecks, renderLinks, renderNow } from "./panels.js";
import { badge, besideError, clock, count, el, fill, panel, stateWords, tableWords } from "./ui.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 5000; // the audit and the shuffle check are asked again at most this often

let audit = null;
let shuffle = null;
let lastAsked = 0;
let asking = false;

async function refreshReports(ctx, force = false) {
  if (asking || (!force && Date.now() - lastAsked < REFRESH_MS)) return;
  asking = true;
  lastAsked = Date.now();
  try {
    const [a, s] = await Promise.all([ctx.request({ action: "audit_status" }), ctx.request({ action: "shuffle_check" })]);
    audit = a;
    shuffle = s;
  } catch {
    lastAsked = 0; // not connected yet: asked again at the next redraw
    setTimeout(() => ctx.redraw(), 500);
  } finally {
    asking = false;
    ctx.redraw();
  }
}

function renderHeld(box, status) {
  const held = Status.held(status);
  if (!held) {
    fill(box, el("h2", {}, "Held round"), el("p", { id: "no-held" }, badge("ok", "no round is held")));
    return;
  }
  fill(box, el("h2", {}, "Held round"),
    el("p", { id: "held-round", "data-round": held.round_id }, badge("bad", "HELD"),
      ` round ${held.number ?? ""} (${held.round_id})`),
    el("p", {}, `Why: ${tableWords(held.reason)}`),
    held.void_requested_by ? el("p", { id: "held-void-asked" }, `Void asked by ${held.void_requested_by}: a second `
      + "supervisor confirms it below.") : null,
    el("p", {}, held.settled
      ? "Its results were recorded before the hold: they stand (58 Pa. Code 816a.1); the dealer finishes the collect."
      : "Not settled: void it (the wagers are returned), or release it when it may go on."));
}

function renderIncidents(box, model, ctx) {
  const items = model.incidents.filter((i) => i.type !== "supervisor_action").slice(0, 12);
  const words = (i) => i.type === "custody_violation" ? `custody rule broken: ${String(i.data.rule || "").replace(/_/g, " ")}`
    + (i.data.citation ? ` (${i.data.citation})` : "")
    : i.type === "round_held" ? `round held: ${i.data.reason || ""}` : `incident: ${i.data.what || ""}`;
  if (!items.length && ctx.statusOnly) { // no event stream: the standing ones are in Alarms
    fill(box, el("h2", {}, "Incidents"), el("p", { id: "incidents-status-only", class: "muted" },
      "This table keeps no journal, so no incidents are listed here as they happen: the standing ones are in "
      + "Alarms above, with their Acknowledge button."));
    return;
  }
  fill(box, el("h2", {}, "Incidents"), items.length ? el("ul", { class: "alarms" }, items.map((i) => el("li", {
    class: "alarm", "data-incident": i.seq }, badge("warn", clock(i.ts)), " ", tableWords(words(i)), " ",
  el("button", { class: "small", id: `ack-${i.seq}`, "aria-label": `Acknowledge incident ${i.seq}`,
    disabled: ctx.me.role !== "supervisor", onclick: () => ctx.act("acknowledge_incident", { incident: i.seq }, `ack-${i.seq}`) },
  "Acknowledge"), besideError(ctx.errors, `ack-${i.seq}`)))) : el("p", {}, badge("ok", "none since this screen opened")));
}

function renderAudit(box) {
  if (!audit) { fill(box, el("h2", {}, "Audit"), el("p", { class: "muted" }, "asking the table…")); return; }
  if (!audit.ok) { fill(box, el("h2", {}, "Audit"), el("p", { class: "refused" }, audit.error)); return; }
  const a = audit.audit;
  const cp = a.last_checkpoint;
  // "unsigned": what follows the last checkpoint (the round in progress: the table signs at its end)
  // holds its chain and is not yet signed; the normal state during play, not an alarm.
  const verdict = a.status === "ok" ? badge("ok", "journal verified") : a.status === "unanchored"
    ? badge("warn", "chain holds, end not vouched for") : a.status === "unsigned"
      ? badge("ok", `journal verified to its last checkpoint; ${count(a.unsigned_tail, "entry", "entries")} since, signed at the round's end`)
      : badge("bad", `JOURNAL ${String(a.status).toUpperCase()}`);
  fill(box, el("h2", {}, "Audit"), el("p", { id: "audit-status", "data-status": a.status }, verdict),
    el("table", { class: "facts" },
      el("tr", {}, el("th", {}, "entries"), el("td", {}, a.entries)),
      el("tr", {}, el("th", {}, "signed checkpoints"), el("td", {}, a.checkpoints)),
      el("tr", {}, el("th", {}, "last checkpoint"), el("td", { id: "last-checkpoint" },
        cp ? `entry ${cp.seq}, ${clock(cp.ts)}, ${count(cp.rounds_opened, "round")} opened${cp.signed ? ", signed" : ""}` : "none")),
      el("tr", {}, el("th", {}, "entries after it"), el("td", {}, a.unsigned_tail)),
      a.reason ? el("tr", {}, el("th", {}, "why"), el("td", {}, a.reason)) : null));
}

function renderShuffle(box) {
  if (!shuffle) { fill(box, el("h2", {}, "Shuffle check"), el("p", { class: "muted" }, "asking the table…")); return; }
  if (!shuffle.ok) { fill(box, el("h2", {}, "Shuffle check"), el("p", { class: "refused" }, shuffle.error)); return; }
  const s = shuffle.shuffle_check;
  const decks = Object.entries(s.decks || {});
  fill(box, el("h2", {}, "Shuffle check"),
    el("p", { id: "shuffle-verdict", "data-verdict": s.verdict }, `All decks, ${count(s.rounds, "round")}: the shuffle `,
      s.verdict === "fail" ? badge("bad", VERDICT_WORDS.fail) : s.verdict === "pass" ? badge("ok", VERDICT_WORDS.pass)
        : badge("off", VERDICT_WORDS.insufficient),
      s.p_value !== null && s.p_value !== undefined ? ` (p = ${Number(s.p_value).toPrecision(3)}, fails below 0.05)` : ""),
    decks.length ? decks.map(([d, c]) => el("figure", { class: "deck-chart" },
      el("figcaption", {}, `Deck ${d}: ${count(c.rounds, "round")}, ${VERDICT_WORDS[c.verdict] || c.verdict}`),
      shuffleChart(d, c))) : el("p", {}, "No round is over yet."));
}

let wired = false; // the forms' listeners are attached: until then every button stays disabled (supervisor.html)
const sending = new Set(); // buttons whose form's answer is awaited: a second tap would send it again

/** Send a form's command with its button disabled until the table answers (ctx.act never rejects). */
async function sendOnce(ctx, button, action, args) {
  const focused = document.activeElement === $(button); // disabled, it loses the focus: given back after
  sending.add(button);
  renderHints(ctx);
  try {
    return await ctx.act(action, args, button);
  } finally {
    sending.delete(button);
    renderHints(ctx);
    const again = $(button);
    if (focused && again && !again.disabled && (!document.activeElement || document.activeElement === document.body)) again.focus();
  }
}

function wireForms(ctx) {
  $("void-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const reason = $("void-reason").value.trim();
    if (!reason) {
      ctx.say("void: a reason is required", "bad");
      ctx.errors["void-button"] = "Refused: a void needs a reason (it is journaled).";
      $("void-button-error").textContent = ctx.errors["void-button"];
      $("void-button-error").hidden = false;
      $("void-reason").focus();
      return;
    }
    const running = Status.round(ctx.status);
    const held = Status.held(ctx.status);
    // The round this supervisor is looking at: the table refuses the void if another is running.
    const roundId = held ? held.round_id : running ? running.round_id : null;
    const reply = await sendOnce(ctx, "void-button", "void", roundId ? { reason, round_id: roundId } : { reason });
    if (reply.ok) $("void-reason").value = "";
  });
  $("release-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const reason = $("release-reason").value.trim();
    const held = Status.held(ctx.status);
    const args = {};
    if (reason) args.reason = reason;
    if (held) args.round_id = held.round_id;
    const reply = await sendOnce(ctx, "release-button", "release_hold", args);
    if (reply.ok) $("release-reason").value = "";
  });
  $("deck-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const deckId = $("deck-id").value.trim();
    const reply = await sendOnce(ctx, "deck-button", "register_deck", { deck_id: deckId });
    if (reply.ok) $("deck-id").value = "";
  });
  $("card-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const card = $("card-face").value.trim();
    const w = Status.waitingFor(ctx.status);
    // The entry names the draw it is for: a second click is refused for the next unreadable card.
    const args = w && w.action === "confirm_card" && Number.isInteger(w.draw_index) ? { card, draw_index: w.draw_index }
      : { card };
    const reply = await sendOnce(ctx, "card-button", "confirm_card", args);
    if (reply.ok) $("card-face").value = "";
  });
  wired = true;
  renderHints(ctx); // each button as the role and the table's state allow, now that it is heard
}

function renderHints(ctx) {
  const { status, model } = ctx;
  const w = Status.waitingFor(status);
  const out = Status.decks(status).filter((d) => d.place === "out_of_service");
  const takeOutFirst = out.length && w && w.action === "take_from_shuffler";
  fill($("deck-hint"), out.length ? `Deck ${out.map((d) => `${d.deck_id} (${d.back_colour} backs)`).join(", ")} is out of `
    + (takeOutFirst ? "service: the dealer takes it out of the shuffler first, then register a replacement with the same "
      + "back colour." : "service: register a replacement with the same back colour.") : "No deck is out of service.");
  // Cards are counted from 1, as the banner says them (the table's draw_index counts from 0).
  fill($("card-hint"), w && w.action === "confirm_card"
    ? `The shoe could not read card ${Number.isInteger(w.draw_index) ? w.draw_index + 1 : ""}: enter it as the card shows.`
    : "No card waits to be entered.");
  const may = wired && ctx.me.role === "supervisor";
  $("deck-button").disabled = !may || sending.has("deck-button");
  $("card-button").disabled = !may || !(w && w.action === "confirm_card") || sending.has("card-button");
  const held = Status.held(status);
  const round = model.round;
  const running = Status.round(status);
  fill($("void-round"), held ? `Held round ${held.number ?? ""} (${held.round_id}).` : running
    ? `Round ${running.number} (${running.round_id}), ${stateWords(running.state)}.` : "No round is running.");
  // Nothing to void: no round running and none held (the table would refuse it anyway).
  // A void asked and waiting for a second supervisor is confirmed below, not asked again.
  $("void-button").disabled = !may || !(held || running) || ctx.offline
    || Boolean(held && held.void_requested_by) || sending.has("void-button");
  $("release-button").disabled = !may || !held || Boolean(held.settled) || ctx.offline || sending.has("release-button");
  const rule = Status.voidNeedsSecondSupervisor(status);
  fill($("void-rule"), rule ? "Decisions are final: a void now needs a second supervisor to confirm it (two-person rule)."
    : "Wagers are returned; refused once results are recorded (58 Pa. Code 816a.1).");
  const pending = Status.pendingVoid(status);
  panel($("second-supervisor"), [rule, pending, ctx.me.person, ctx.errors["confirm-void"] || null, sending.has("confirm-void")], (box) => {
    if (!rule && !pending) { fill(box); return; }
    const mine = pending && pending.supervisor === ctx.me.person;
    fill(box, el("h3", {}, "Second supervisor"),
      pending ? el("p", { id: "pending-void" }, `Void asked by ${pending.supervisor || "a supervisor"}: `
        + tableWords(pending.reason))
        : el("p", { class: "muted" }, "When another supervisor asks for the void, confirm it here."),
      pending && pending.held_for ? el("p", { id: "pending-void-held", class: "muted" },
        `The round is held because: ${tableWords(pending.held_for)}`) : null,
      el("button", { id: "confirm-void", class: "danger",
        disabled: !pending || mine || ctx.me.role !== "supervisor" || sending.has("confirm-void"),
        onclick: () => sendOnce(ctx, "confirm-void", SECOND_SUPERVISOR_ACTION,
          pending && pending.round_id ? { round_id: pending.round_id } : {}) },
      mine ? "Another supervisor must confirm your void" : "Confirm the void"), besideError(ctx.errors, "confirm-void"));
  });
}

let lastRounds = -1;

let history = null;
let historyKey = null;

function render(ctx) {
  const { model, status, me, offline, signedOut } = ctx;
  const w = Status.waitingFor(status);
  panel($("table-id"), [model.tableId], (box) => fill(box, model.tableId ? `table ${model.tableId}` : ""));
  panel($("now"), [w, Status.roundLine(status), Status.links(status), status === null, offline, signedOut, ctx.errors],
    (box) => renderNow(box, status, me, ctx.act, { offline, signedOut, screen: "supervisor", errors: ctx.errors }));
  panel($("alarms"), [Status.alarms(status), offline, ctx.errors["ack-incidents"] || null],
    (box) => renderAlarms(box, status, offline, ctx));
  panel($("held"), [Status.held(status), offline], (box) => offline
    ? fill(box, el("h2", {}, "Held round"), el("p", {}, badge("off", "unknown while the table does not answer")))
    : renderHeld(box, status));
  panel($("incidents"), [model.incidents.map((i) => i.seq), ctx.errors, Boolean(ctx.statusOnly)],
    (box) => renderIncidents(box, model, ctx));
  panel($("decks"), [Status.decks(status)], (box) => renderDecks(box, status));
  panel($("links"), [Status.links(status), offline], (box) => renderLinks(box, status, offline));
  const key = JSON.stringify([Status.roundsPlayed(status), Status.roundLine(status), model.incidents.length]);
  if (history && status && key !== historyKey) { historyKey = key; history.refresh(); }
  panel($("audit"), [audit], renderAudit);
  panel($("shuffle"), [shuffle], renderShuffle);
  renderHints(ctx);
  const played = Status.roundsPlayed(status);
  if ((played !== null && played !== lastRounds) || (!audit && !asking)) {
    lastRounds = played;
    refreshReports(ctx, !audit);
  }
}

boot({ allowed: ["supervisor", "auditor"], render }).then((ctx) => {
  if (!ctx) return;
  history = new HistoryPanel($("history"), ctx.request);
  history.render();
  wireForms(ctx);
  refreshReports(ctx, true);
  // The audit and the shuffle check follow the journal: asked again every REFRESH_MS while
  // the screen is shown (each answer is cached by the table until the journal grows).
  setInterval(() => { if (!document.hidden && !ctx.offline) refreshReports(ctx, true); }, REFRESH_MS);
});
