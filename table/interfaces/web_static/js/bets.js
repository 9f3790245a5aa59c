// The dealer's bet entry: per seat a spot with chip buttons, "same as last
// round", "table minimum" and "empty", while the round is open for bets. Each press
// sends one place_bets request (docs/console.md) with the seat's whole new bet; the
// table's answer is what the spot shows, and a refusal (below the minimum, above the
// maximum, not a whole chip, a Six Card or progressive bet without an ante, ...) is
// shown beside the seat in the table's own words. The bets, the limits and the layout
// come from the status (`bets`, table.bets.BetBook.to_dict()), asked again after each
// answer; nothing is kept in the page but each spot's refusal and the wager kind its
// chips add to. That kind is the one the dealer chose for the seat in this round: every
// seat starts each round at the Ante (a seat that bet Pair Plus last round takes an ante
// from a plain chip press), and "same as last" repeats last round's bets as the table
// froze them, whatever kind was chosen then.

import { Status } from "./model.js";
import { besideError, el, fill, money } from "./ui.js";

// The wager kinds come from the table (table/rules/kinds.py, in the status's bets): their
// keys in order, the spot's words and the short tab label of each.
let KINDS = [];
let KIND_WORDS = {};
let KIND_SHORT = {};
function learn(status) {
  const kinds = Status.kinds(status);
  KINDS = kinds.map((k) => k.key);
  KIND_WORDS = Object.fromEntries(kinds.map((k) => [k.key, String(k.spot || k.label || k.key)]));
  KIND_SHORT = Object.fromEntries(kinds.map((k) => [k.key, String(k.short || k.spot || k.key)]));
}

/** Cents as dollars for a chip or a bet: 2500 -> "$25", 1250 -> "$12.50". */
export function dollars(cents) {
  return cents % 100 === 0 ? `$${(cents / 100).toLocaleString("en-US")}` : money(cents);
}
const CHIPS = [100, 500, 2500, 10000, 50000]; // $1, $5, $25, $100, $500: the usual chip colours

// kind: seat -> the wager kind chosen for it in round `kindRound` (forgotten when another round opens)
const local = { kind: {}, kindRound: null, refused: {}, busy: {} };

/** The round the bets are for (its id), from the status; the chosen kinds belong to it alone. */
function betsRound(status) {
  const r = Status.roundLine(status);
  return r ? r.round_id || `number ${r.number}` : null;
}

/** The chip buttons of one wager kind: the house denominations the limit's chip divides, up to its maximum. */
export function chipsFor(limit) {
  if (!limit) return [];
  const out = CHIPS.filter((c) => c >= limit.chip_cents && c % limit.chip_cents === 0 && c <= limit.maximum_cents);
  if (!out.includes(limit.chip_cents) && limit.chip_cents <= limit.maximum_cents) out.unshift(limit.chip_cents);
  return out.slice(0, 4);
}

function zero() { return Object.fromEntries(KINDS.map((k) => [k, 0])); }

/** What the table says seat `s` has bet now. */
function placed(bets, s) {
  return (bets.seats && bets.seats[String(s)]) || null;
}

function words(w) {
  if (!w || !KINDS.some((k) => w[k] > 0)) return "empty";
  return KINDS.filter((k) => w[k] > 0).map((k) => `${KIND_WORDS[k]} ${dollars(w[k])}`).join(" · ");
}

/** One place_bets request (`seat` null: every seat), then the status again; the spot shows the answer. */
async function send(ctx, seat, args, redraw) {
  const key = seat === null ? "*" : String(seat);
  local.busy[key] = true;
  redraw();
  let reply;
  try {
    reply = await ctx.request({ action: "place_bets", ...(seat === null ? { all_seats: true } : { seat }), ...args });
    if (reply.ok) {
      for (const s of Object.keys(reply.seats || {})) delete local.refused[s];
      delete local.refused["*"];
    } else {
      local.refused[reply.seat !== undefined ? String(reply.seat) : key] = reply.error || "refused";
    }
    const status = await ctx.request({ action: "status" });
    if (status.ok) ctx.status = status;
  } catch (err) {
    reply = { ok: false, error: String(err.message || err) };
    local.refused[key] = reply.error;
  } finally {
    local.busy[key] = false;
  }
  redraw();
  return reply;
}

function spot(ctx, bets, s, open, redraw) {
  const key = String(s);
  const w = placed(bets, s);
  const offered = (bets.offered || KINDS).filter((k) => KINDS.includes(k));
  const kind = offered.includes(local.kind[key]) ? local.kind[key] : offered[0];
  const limit = (bets.limits || {})[kind];
  const busy = Boolean(local.busy[key]);
  const add = (c) => {
    const next = { ...zero(), ...(w || {}) };
    next[kind] = (next[kind] || 0) + c;
    return send(ctx, s, next, redraw);
  };
  const tabs = el("div", { class: "bet-kinds", role: "radiogroup", "aria-label": `Seat ${s}: the wager the chips add to` },
    offered.map((k) => el("button", { class: `small bet-kind${k === kind ? " chosen" : ""}`, id: `bet-${s}-kind-${k}`,
      role: "radio", "aria-checked": k === kind ? "true" : "false", "aria-label": `Seat ${s}: chips on the ${KIND_WORDS[k]}`,
      disabled: !open, onclick: () => { local.kind[key] = k; redraw(); } }, KIND_SHORT[k])));
  const chips = el("div", { class: "bet-chips" }, chipsFor(limit).map((c) => el("button", {
    class: "chip", id: `bet-${s}-chip-${c}`, "data-chip-cents": c, disabled: !open || busy,
    "aria-label": `Seat ${s}: add ${dollars(c)} to the ${KIND_WORDS[kind]}`, onclick: () => add(c) }, dollars(c))));
  const quick = el("div", { class: "bet-quick" },
    el("button", { class: "small", id: `bet-${s}-last`, disabled: !open || busy || !bets.last,
      "aria-label": `Seat ${s}: same as last round`, onclick: () => send(ctx, s, { same_as_last: true }, redraw) },
    "Last"),
    el("button", { class: "small", id: `bet-${s}-min`, disabled: !open || busy,
      "aria-label": `Seat ${s}: the table minimum`, onclick: () => send(ctx, s, { table_minimum: true }, redraw) },
    "Min"),
    el("button", { class: "small", id: `bet-${s}-empty`, disabled: !open || busy || !w,
      "aria-label": `Seat ${s}: empty`, onclick: () => send(ctx, s, { empty: true }, redraw) }, "Empty"));
  const refused = local.refused[key];
  return el("div", { class: `bet-spot${w ? " in-play" : ""}`, id: `bet-spot-${s}`, "data-seat": s,
    "data-in-play": w ? "true" : "false" },
  el("h3", {}, `Seat ${s}`),
  el("p", { class: "bet-placed", id: `bet-${s}-placed`, "aria-live": "polite",
    ...Object.fromEntries(KINDS.map((k) => [`data-${k.replace(/_/g, "-")}-cents`, w ? w[k] || 0 : 0])) }, words(w)),
  open ? [tabs, chips, quick] : null,
  refused ? el("p", { class: "bet-refused", id: `bet-${s}-refused`, role: "alert" }, refused) : null);
}

/**
 * The bets panel (on the dealer's screen): the seats' spots while bets are open. Hidden
 * otherwise: once bets close the round's seats show the bets as frozen; an older table
 * sends no bets.
 */
export function renderBets(box, ctx, redraw) {
  learn(ctx.status);
  const bets = Status.bets(ctx.status);
  const w = Status.waitingFor(ctx.status);
  const staff = ["dealer", "supervisor"].includes(ctx.me.role);
  const open = Boolean(bets && Array.isArray(bets.layout) && bets.open && staff && w
    && (w.accepts || []).includes("place_bets"));
  if (!open) { // bets closed (the seats show them as frozen), or a table that sends no bets
    for (const k of Object.keys(local.refused)) delete local.refused[k];
    fill(box);
    box.hidden = true;
    return;
  }
  box.hidden = false;
  const round = betsRound(ctx.status);
  if (round !== local.kindRound) { // a new round: every seat's chips go on the Ante again
    local.kind = {};
    local.kindRound = round;
  }
  const inPlay = bets.layout.filter((s) => placed(bets, s));
  const head = el("div", { class: "bets-head" },
    el("h2", {}, open ? "Bets: open" : "Bets"),
    el("span", { class: "muted", id: "bets-in-play", "data-count": inPlay.length },
      `${inPlay.length} seat${inPlay.length === 1 ? "" : "s"} in play`),
    open ? el("button", { class: "small", id: "bets-all-last", disabled: !bets.last,
      onclick: () => send(ctx, null, { same_as_last: true }, redraw) }, "Every seat: same as last") : null,
    open ? el("button", { class: "small", id: "bets-all-min",
      onclick: () => send(ctx, null, { table_minimum: true }, redraw) }, "Every seat: table min") : null,
    open && w.action !== "close_bets" && (w.accepts || []).includes("close_bets")
      ? el("button", { class: "primary", id: "bets-close", disabled: inPlay.length === 0,
        onclick: () => ctx.act("close_bets", {}, "bets-close") }, "Close bets") : null);
  const all = local.refused["*"] ? el("p", { class: "bet-refused", id: "bets-refused", role: "alert" },
    local.refused["*"]) : null;
  fill(box, head, besideError(ctx.errors, "bets-close"), all, el("div", { class: "bet-spots" }, bets.layout.map((s) => spot(ctx, bets, s, open, redraw))));
}

/** What the panel shows depends on: for panel()'s redraw-when-changed. */
export function betsKey(ctx) {
  return [Status.bets(ctx.status), Status.waitingFor(ctx.status), local, ctx.errors["bets-close"] || null];
}
