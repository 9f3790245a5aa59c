// What the screens know of the table: the public event stream (sealed: 58 Pa. Code
// 816a.1) applied to a small model of the round in progress and the last one, and the
// table's status. `Status` is the one place that reads the status fields (the
// contract of docs/decisions/0005-one-status-contract.md, filled in by table/interfaces/status_view.py until the core
// gives them itself): nothing else in the pages reads a status member.

const linkDown = (s, name) => {
  const l = s && s.links && s.links[name];
  return Boolean(l) && !l.up;
};

/** Readers of the status object: the only code that knows its members. */
export const Status = {
  waitingFor: (s) => (s && s.waiting_for) || null,
  decks: (s) => (s && Array.isArray(s.decks) ? s.decks
    : Object.entries((s && s.places) || {}).map(([deck_id, place]) => ({ deck_id, place, back_colour: null }))),
  links: (s) => (s && s.links) || {},
  /** The table's standing alarms; a held round is always one (after a restart the core
   *  reports the hold, not yet its alarm), and so is a device whose link is down. */
  alarms: (s) => {
    const list = s && Array.isArray(s.alarms) ? s.alarms.slice() : [];
    const held = s && s.held;
    if (held && !list.some((a) => a.kind === "held")) {
      list.unshift({ id: "held", kind: "held", text: `round ${held.number ?? held.round_id} held: ${held.reason || ""}`,
        since: null });
    }
    for (const name of ["shuffler", "shoe"]) {
      if (linkDown(s, name) && !list.some((a) => a.kind === "device_down" && String(a.text).includes(name))) {
        list.push({ id: `down-${name}`, kind: "device_down", text: `the ${name} does not answer (${s.links[name].state})`,
          since: null });
      }
    }
    return list;
  },
  held: (s) => (s && s.held) || null,
  /** The first device whose link is down ("shuffler" | "shoe"), or null. */
  deviceDown: (s) => ["shoe", "shuffler"].find((n) => linkDown(s, n)) || null,
  /** The round this status is about: the one running, else the held one ({number, state, round_id}). */
  roundLine: (s) => {
    const r = s && s.round;
    const h = s && s.held;
    if (h && (!r || r.round_id === h.round_id)) return { number: h.number ?? (r && r.number), round_id: h.round_id, state: "held" };
    return r ? { number: r.number, round_id: r.round_id, state: r.state } : null;
  },
  /** A seat's wagers as placed ({ante: cents, ...}), from the status's round, or null. */
  seatWagers: (s, seat) => {
    const seats = s && s.round && s.round.seats;
    const w = seats && seats[String(seat)] && seats[String(seat)].wagers;
    return w || null;
  },
  round: (s) => (s && s.round) || null,
  /** The table's seats as configured ([table] seats; the bet book's layout), or null (an older table). */
  layout: (s) => (s && s.bets && Array.isArray(s.bets.layout) ? s.bets.layout.filter((n) => Number.isInteger(n)) : null),
  /** The bet book while a round takes bets (table.bets.BetBook.to_dict()), or null. */
  bets: (s) => (s && s.bets && typeof s.bets === "object" ? s.bets : null),
  /** The wager kinds a seat may place, in order (table/rules/kinds.py, served in the bets):
   *  [{key, label, spot, short, paytable_slot, needs_ante, route}], [] from an older table. */
  kinds: (s) => {
    const k = s && s.bets && typeof s.bets === "object" ? s.bets.kinds : null;
    return Array.isArray(k) ? k.filter((x) => x && typeof x.key === "string") : [];
  },
  roundsPlayed: (s) => (s && Number.isInteger(s.rounds_played) ? s.rounds_played : null),
  /** The status to show after `prev`: between two seats' decisions the table records the
   *  one taken before it asks for the next (a moment with no `waiting_for`); the screens go
   *  on asking for decisions (marked `between: true`, no seat's buttons) instead of a flash of
   *  "nothing to do". Anything else (a hold, another step) shows at once. */
  between: (prev, next) => {
    const pw = prev && prev.waiting_for;
    const r = next && next.round;
    if (next && !next.waiting_for && !next.held && pw && pw.action === "decide" && r && r.state === "decisions"
        && prev.round && prev.round.round_id === r.round_id) {
      return { ...next, waiting_for: { ...pw, between: true } };
    }
    return next;
  },
  voidNeedsSecondSupervisor: (s) => Boolean(s && s.void_needs_second_supervisor),
  /** The void a second supervisor must confirm (two-person rule), or null: the held round
   *  names who asked it (held.void_requested_by), and the table waits for confirm_void. */
  pendingVoid: (s) => {
    const h = s && s.held;
    const w = s && s.waiting_for;
    const asked = h && h.void_requested_by;
    if (!asked && !(w && w.action === "confirm_void")) return null;
    // The void's own reason (what the first supervisor wrote), not the hold's: the second
    // supervisor confirms what was asked.
    return { supervisor: asked || null, round_id: (h && h.round_id) || (w && w.round_id) || null,
      reason: (h && (h.void_reason || h.reason)) || "", held_for: (h && h.void_reason && h.reason) || "" };
  },
};

/** The action a second supervisor sends to confirm a void under the two-person rule. */
export const SECOND_SUPERVISOR_ACTION = "confirm_void";

const MAX_INCIDENTS = 50;
const MAX_PERF = 2000;

/** Event-to-screen latency, measured in the page: the event's journal time to the frame that shows it. */
export class PerfLog {
  constructor() { this.samples = []; this.waiting = []; }
  received(ev) {
    const t = Date.parse(ev.ts);
    if (!Number.isNaN(t)) this.waiting.push([ev.seq, ev.type, t]);
    if (this.waiting.length > MAX_PERF) this.waiting.splice(0, this.waiting.length - MAX_PERF);
  }
  shown(now = Date.now()) {
    for (const [seq, type, t] of this.waiting) this.samples.push({ seq, type, ms: now - t });
    this.waiting = [];
    if (this.samples.length > MAX_PERF) this.samples.splice(0, this.samples.length - MAX_PERF);
  }
}

function seatOf(to) {
  const m = /^seat([1-7])$/.exec(String(to || ""));
  return m ? Number(m[1]) : null;
}

function newRound(ev) {
  const d = ev.data || {};
  const seats = Array.isArray(d.seats) ? d.seats.filter((s) => Number.isInteger(s)) : [];
  const cards = {};
  for (const s of seats) cards[s] = [];
  return {
    id: ev.round_id, number: d.number, seats, wagers: d.wagers || {}, cards, dealer: [],
    betsClosed: false, decisions: {}, decisionsFinal: false, dealerHand: null, dealerHandName: null, qualifies: null,
    results: null, net: null, held: null, voided: null, closed: false, openedAt: ev.ts,
  };
}

/** The table as the events say: the round in progress and the last round. */
export class TableModel {
  constructor() {
    this.tableId = null;
    this.round = null;
    this.lastRound = null;
    this.incidents = [];
    this.lastCheckpoint = null;
    this.status = null;
    this.lastSeq = 0;
    this.rounds = 0;
    this.perf = new PerfLog();
  }

  _roundFor(ev) {
    if (this.round && this.round.id === ev.round_id) return this.round;
    if (this.lastRound && this.lastRound.id === ev.round_id) return this.lastRound;
    return null;
  }

  apply(ev) {
    this.lastSeq = ev.seq;
    this.tableId = ev.table_id || this.tableId;
    this.perf.received(ev);
    const d = ev.data || {};
    if (ev.type === "round_opened") {
      if (this.round) this.lastRound = this.round;
      this.round = newRound(ev);
      this.rounds += 1;
      return;
    }
    if (ev.type === "custody_violation" || ev.type === "incident" || ev.type === "supervisor_action"
        || ev.type === "round_held") {
      this.incidents.unshift({ seq: ev.seq, type: ev.type, ts: ev.ts, round_id: ev.round_id, data: d });
      if (this.incidents.length > MAX_INCIDENTS) this.incidents.length = MAX_INCIDENTS;
    }
    if (ev.type === "checkpoint") { this.lastCheckpoint = { seq: d.seq, ts: d.ts, rounds_opened: d.rounds_opened }; return; }
    const r = this._roundFor(ev);
    if (!r) return;
    switch (ev.type) {
      case "bets_closed": // since event schema 1.3: the seats in play and their wagers, as frozen
        r.betsClosed = true;
        if (Array.isArray(d.seats)) {
          r.seats = d.seats.filter((s) => Number.isInteger(s));
          r.wagers = d.wagers || {};
          for (const s of r.seats) r.cards[s] = r.cards[s] || [];
        }
        break;
      case "card_dealt": {
        // The table-wide stream carries no face (816a.1): a card read, face down.
        const card = { draw_index: d.draw_index, face: null, manual: Boolean(d.manual), back: d.back_colour || null };
        if (d.to === "dealer") r.dealer.push(card);
        else {
          const s = seatOf(d.to);
          if (s !== null) (r.cards[s] = r.cards[s] || []).push(card);
        }
        break;
      }
      case "decisions_final":
        r.decisionsFinal = true;
        for (const [s, v] of Object.entries(d.seats || {})) {
          r.decisions[s] = v.decision;
          const faces = Array.isArray(v.cards) ? v.cards : [];
          const slots = r.cards[s] || (r.cards[s] = []);
          faces.forEach((f, i) => { if (slots[i]) slots[i].face = f; else slots.push({ draw_index: null, face: f }); });
        }
        break;
      case "dealer_revealed": {
        r.dealerHand = Array.isArray(d.dealer_hand) ? d.dealer_hand : [];
        r.qualifies = Boolean(d.dealer_qualifies);
        r.dealerHandName = typeof d.dealer_hand_name === "string" ? d.dealer_hand_name : null; // since schema 1.5.0
        r.dealerHand.forEach((f, i) => {
          if (r.dealer[i]) r.dealer[i].face = f; else r.dealer.push({ draw_index: null, face: f });
        });
        break;
      }
      case "round_settled": r.results = d.results || {}; r.net = d.net_cents || {}; r.held = null; break;
      case "round_held": r.held = { reason: d.reason, settled: Boolean(d.settled) }; break;
      case "round_voided":
        r.voided = { reason: d.reason, supervisor: d.supervisor, returned: d.returned_cents || {} };
        r.held = null;
        break;
      case "round_closed": r.closed = true; if (d.voided && !r.voided) r.voided = { reason: "", returned: {} }; break;
      default: break;
    }
  }

  /** A local note that the table accepted a seat's decision (shown until decisions_final). */
  decided(roundId, seat, decision) {
    if (this.round && this.round.id === roundId && !this.round.decisionsFinal) this.round.decisions[seat] = decision;
  }
}
