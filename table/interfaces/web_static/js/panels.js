// The panels both screens show: what the table waits for, the seats and the dealer's
// hand, the decks, the devices' links, and the alarms. Each is rendered whole from the
// model and the status (nothing else is kept in the page).

import { Status } from "./model.js";
import { badge, besideError, cardEl, clock, el, fill, handHeadline, money, placeWords, stateWords, tableWords, wagerName,
  wagerWords } from "./ui.js";

const DEALER_ACTIONS = new Set(["close_bets", "confirm_collect"]);
const BUTTON_WORDS = { close_bets: "Close bets", confirm_collect: "Confirm the collect" };
const ROLE_WORDS = { dealer: "the dealer", supervisor: "a supervisor", device: "the dealer, at the devices" };

/** The line above the banner: the round and its step, the held round during a hold. */
function stepLine(status) {
  const r = Status.roundLine(status);
  if (!r) return "Between rounds";
  return `Round ${r.number ?? ""}: ${stateWords(r.state)}`;
}

/**
 * What the table waits for, in words, with the one button that does it (when it is this
 * person's). `opts.offline`: the table does not answer (nothing it said before is shown as
 * current); `opts.signedOut`: the session ended (a restart): sign in again;
 * `opts.screen`: "dealer" | "supervisor", the screen this banner is on.
 */
export function renderNow(box, status, me, act, opts = {}) {
  if (opts.signedOut) {
    fill(box, el("p", { class: "now-step" }, "Session ended"),
      el("p", { class: "now-what", id: "now-what", "data-waiting-action": "", "data-screen-state": "signed_out" },
        "The table restarted or your session ended: sign in again."),
      el("p", { class: "now-who" }, "What the table holds is shown again once you are signed in."),
      el("a", { class: "big link-button primary", id: "sign-in-again",
        href: `/?again=1&next=${encodeURIComponent(location.pathname)}` }, "Sign in again"));
    return;
  }
  if (opts.offline) {
    fill(box, el("p", { class: "now-step" }, "OFFLINE"),
      el("p", { class: "now-what", id: "now-what", "data-waiting-action": "", "data-screen-state": "offline" },
        "The table does not answer: what it waits for is unknown until it is back."),
      el("p", { class: "now-who" }, "Do nothing at the table until this screen is live again."));
    return;
  }
  const w = Status.waitingFor(status);
  const head = el("p", { class: "now-step", id: "now-step", "data-step": (Status.roundLine(status) || {}).state || "" },
    stepLine(status));
  const down = Status.deviceDown(status);
  if (down && (!w || w.role === "device" || w.action === "reconnect")) {
    const l = Status.links(status)[down];
    fill(box, head, el("p", { class: "now-what", id: "now-what", "data-waiting-action": w ? w.action || "" : "",
      "data-screen-state": "device_down", "data-device": down },
    `The ${down} is DOWN${l.state && l.state !== "down" ? ` (${l.state})` : ""}: check its cable and power.`),
    el("p", { class: "now-who" }, w && w.action !== "reconnect"
      ? `Then the table waits for ${w.what}.` : "The table goes on by itself once it answers again."));
    return;
  }
  if (!w) {
    const r = Status.round(status);
    fill(box, head, el("p", { class: "now-what", id: "now-what", "data-waiting-action": "" },
      !status ? "Connecting to the table…" : r ? `The table is recording round ${r.number}'s ${stateWords(r.state)}…`
        : "The table is getting the next round ready…"));
    return;
  }
  const mine = w.role === "dealer" ? ["dealer", "supervisor"].includes(me.role) : w.role === me.role;
  const what = el("p", { class: "now-what", id: "now-what", "data-waiting-action": w.action || "",
    "data-waiting-role": w.role || "", "data-waiting-colour": w.colour || "" },
  `The table waits for ${tableWords(w.what)}.`);
  const who = el("p", { class: "now-who" }, `Who: ${ROLE_WORDS[w.role] || w.role}`);
  let button = null;
  const errors = opts.errors || {};
  if (mine && DEALER_ACTIONS.has(w.action)) {
    button = [el("button", { class: "big primary", id: "do-now", onclick: () => act(w.action, {}, "do-now") },
      BUTTON_WORDS[w.action]), besideError(errors, "do-now")];
  } else if ((w.accepts || []).includes("dealer_hands") && ["dealer", "supervisor"].includes(me.role)) {
    // Training (run --simulate --pace person): the trainee's hands, through the simulated table.
    const args = { step: w.action, ...(Number.isInteger(w.draw_index) ? { draw_index: w.draw_index } : {}) };
    button = [el("button", { class: "big primary", id: "do-hands", "data-step": w.action,
      onclick: () => act("dealer_hands", args, "do-hands") }, handsWords(w)), besideError(errors, "do-hands")];
    who.append(" — training table: the button is the dealer's hands");
  } else if (w.action === "decide" && w.between) {
    what.dataset.between = "yes"; // not an instruction: the table is taking the last one
    what.textContent = w.seat ? `The table takes seat ${w.seat}'s decision, then asks for the next seat's.`
      : "The table takes the decision, then asks for the next seat's.";
    button = el("p", { class: "now-hint" }, "Play or Fold for the next seat comes up in a moment.");
  } else if (w.action === "decide") {
    button = el("p", { class: "now-hint" }, w.seat ? `Seat ${w.seat}: press Play or Fold on the seat.`
      : "Press Play or Fold on each seat in turn, from seat 1.");
  } else if (w.action === "acknowledge_incident" && me.role === "supervisor" && opts.screen === "supervisor") {
    // An incident the table holds for before it deals (a journal behind its signed
    // checkpoint, a refused anchor, the floor's notary away): acknowledged here, with a note.
    const send = () => {
      const note = (document.getElementById("ack-note") || {}).value || "";
      act("acknowledge_incident", note.trim() ? { note: note.trim() } : {}, "ack-now");
    };
    button = [el("p", { class: "now-ack" }, el("label", { for: "ack-note" }, "Note (optional, journaled)"),
      el("input", { id: "ack-note", maxlength: 500 })),
    el("button", { class: "big primary", id: "ack-now", onclick: send }, "Acknowledge"), besideError(errors, "ack-now")];
  } else if (w.role === "supervisor" && me.role === "supervisor") {
    button = opts.screen === "supervisor"
      ? el("p", { class: "now-hint", id: "now-hint" }, "Use the forms below.")
      : el("a", { class: "big link-button", href: "/supervisor.html" }, "Open the supervisor's screen");
  }
  fill(box, head, what, who, button);
}

/** The training button's words: the physical step, as the trainee does it. */
function handsWords(w) {
  if (w.action === "draw_card") return Number.isInteger(w.draw_index) ? `Deal card ${w.draw_index + 1}` : "Deal the next card";
  if (w.action === "insert_deck") return `Put the ${w.colour || ""} deck into the shuffler`;
  if (w.action === "take_from_shuffler") return "Take the deck out of the shuffler";
  if (w.action === "load_shoe") return `Load the ${w.colour || ""} deck into the shoe`;
  return "Do it";
}

function seatWagers(wagers) {
  const placed = Object.entries(wagers || {}).filter(([, v]) => v > 0);
  if (!placed.length) return [el("li", { "data-wager-placed": "" }, "no wager")];
  return placed.map(([k, v]) => el("li", { "data-wager-placed": k, "data-cents": v }, `${wagerName(k)} ${money(v)}`));
}

function slots(cards, n = 3) {
  const out = (cards || []).map((c) => cardEl(c.face, { back: c.back }));
  while (out.length < n) out.push(cardEl(null, { empty: true }));
  return out;
}

/** The seats (wagers, cards face down until decisions are final, decisions, results) and the dealer's hand. */
export function renderSeats(box, model, status, me, act, errors = {}) {
  const r = model.round;
  const layout = Status.layout(status);
  const seatCount = layout ? `${layout.length} seat${layout.length === 1 ? "" : "s"}` : "";
  if (!r) {
    fill(box, el("p", { class: "muted" }, "No round yet."), layout ? el("p", { class: "muted", id: "layout-seats",
      "data-seats": layout.length }, `This table has ${seatCount}.`) : null);
    return;
  }
  // The table's seat count rides on the round's title line: the 1280 x 800 screen keeps its height
  // for the seats (every seat's Play and Fold on screen without scrolling).
  const layoutLine = layout ? el("span", { class: "muted layout-seats", id: "layout-seats", "data-seats": layout.length },
    ` · this table has ${seatCount}`) : null;
  const w = Status.waitingFor(status);
  // While bets are open the seats in play are the bet book's, as the bet spots show them (the
  // round's own seats are known only once bets close): one state on every panel.
  const book = Status.bets(status);
  const now = Status.round(status);
  const betsOpen = Boolean(book && book.open && !r.betsClosed && now && now.round_id === r.id);
  const booked = (s) => (book.seats || {})[String(s)] || null;
  const inRound = betsOpen ? Object.keys(book.seats || {}).map(Number).filter((s) => Number.isInteger(s)) : r.seats;
  const deciding = w && w.action === "decide" && !w.between && ["dealer", "supervisor"].includes(me.role) && !r.decisionsFinal;
  const seats = inRound.map((s) => {
    const result = r.results && r.results[s];
    const decision = r.decisions[s];
    let buttons = null;
    if (deciding && !decision && (!w.seat || w.seat === s)) {
      buttons = el("div", { class: "decide" },
        el("button", { class: "big play", id: `play-${s}`, "aria-label": `Seat ${s} plays`,
          onclick: () => act("decide", { seat: s, decision: "play" }, `decide-${s}`) }, "Play"),
        el("button", { class: "big fold", id: `fold-${s}`, "aria-label": `Seat ${s} folds`,
          onclick: () => act("decide", { seat: s, decision: "fold" }, `decide-${s}`) }, "Fold"));
    }
    const refusedHere = besideError(errors, `decide-${s}`);
    let outcome = null;
    if (result) {
      const net = r.net ? r.net[s] : result.net;
      outcome = el("div", { class: "outcome", "data-net-cents": net },
        el("p", { class: "headline" }, handHeadline(result)),
        el("ul", { class: "wagers" }, (result.wagers || []).map((x) => el("li", {
          class: `wager ${x.outcome}`, "data-wager": x.wager, "data-amount-cents": x.amount,
          "data-outcome": x.outcome }, wagerWords(x)))),
        el("p", { class: "net" }, `net ${money(net, true)}`));
    } else if (r.voided) {
      outcome = el("p", { class: "outcome voided" }, `voided: returned ${money((r.voided.returned || {})[s] ?? 0)}`);
    }
    return el("section", { class: "seat", "data-seat": s, "aria-label": `Seat ${s}` },
      el("h3", {}, `Seat ${s}`),
      el("ul", { class: "placed", "aria-label": `seat ${s}'s wagers` }, seatWagers(betsOpen ? booked(s)
        : Status.seatWagers(status, s) || r.wagers[s])),
      el("div", { class: "cards", "aria-label": `seat ${s}'s cards` }, slots(r.cards[s])),
      buttons ? null : el("p", { class: "decision", "data-decision": decision || "" },
        decision ? (decision === "play" ? "plays" : "folds") : betsOpen ? "bets open"
          : (r.decisionsFinal ? "" : "decision: —")),
      buttons, refusedHere, outcome);
  });
  const dealer = el("section", { class: "seat dealer", "data-seat": "dealer", "aria-label": "Dealer's hand" },
    el("h3", {}, "Dealer"),
    el("div", { class: "cards", "aria-label": "the dealer's cards" }, slots(r.dealer)),
    el("p", { class: "decision", id: "dealer-hand-words" }, r.dealerHand
      ? [r.dealerHandName ? el("strong", { class: "hand-name" }, r.dealerHandName) : null,
        r.dealerHandName ? ": " : "", r.qualifies ? "qualifies (queen high or better)" : "does not qualify"]
      : r.voided ? "never shown: the round was voided" : "sealed until every seat has decided"));
  // Held only while the table says so: a released round goes on under its own step.
  const heldNow = Status.held(status) && Status.held(status).round_id === r.id;
  const title = el("h2", { id: "round-title", "data-held": heldNow ? "yes" : "no" }, `Round ${r.number}`,
    heldNow ? " — HELD" : "", r.voided ? " — VOIDED" : "", r.closed && !r.voided ? " — closed" : "", layoutLine);
  // The table's own layout (status: bets.layout); an older table: up to the last seat in play.
  const seatsAt = layout || Array.from({ length: Math.max(0, ...r.seats) }, (_, i) => i + 1);
  const empty = [];
  for (const s of seatsAt) {
    if (!inRound.includes(s)) {
      empty.push(el("section", { class: "seat empty", "data-empty-seat": s, "aria-label": `Seat ${s}, empty` },
        el("h3", {}, `Seat ${s}`), el("p", { class: "muted" }, betsOpen ? "empty: no bet yet" : "empty: no wager")));
    }
  }
  const all = [...seats, ...empty].sort((a, b) => Number(a.dataset.seat || a.dataset.emptySeat)
    - Number(b.dataset.seat || b.dataset.emptySeat));
  fill(box, title, el("div", { class: "seats" }, dealer, all));
}

const COLOUR_CLASSES = new Set(["red", "blue", "green", "black", "grey", "purple", "orange", "brown"]);

/** Both decks: id, back colour (a swatch and its name), and where each is. */
export function renderDecks(box, status) {
  const decks = Status.decks(status);
  fill(box, el("h2", {}, "Decks"), el("ul", { class: "decks" }, decks.map((d) => el("li", {
    class: d.place === "out_of_service" ? "deck bad" : "deck", "data-deck": d.deck_id, "data-place": d.place },
  el("span", { class: `swatch ${COLOUR_CLASSES.has(d.back_colour) ? d.back_colour : "unknown"}`,
    "aria-hidden": "true" }),
  el("strong", {}, `Deck ${d.deck_id}`), ` ${d.back_colour ? `${d.back_colour} backs` : ""}: `,
  d.place === "out_of_service" ? badge("bad", placeWords(d.place)) : placeWords(d.place)))));
}

/** Link health of both devices, in words. */
export function renderLinks(box, status, offline = false) {
  if (offline) {
    fill(box, el("h2", {}, "Devices"), el("p", { id: "links-unknown" }, badge("off", "unknown while the table does not answer")));
    return;
  }
  const links = Status.links(status);
  const items = ["shuffler", "shoe"].map((name) => {
    const l = links[name];
    if (!l) return el("li", { "data-link": name }, `${name}: `, badge("off", "not reported"));
    return el("li", { "data-link": name, "data-up": l.up ? "yes" : "no" }, `${name}: `,
      l.up ? badge("ok", "up") : badge("bad", `DOWN (${l.state})`),
      l.serial ? el("span", { class: "muted" }, ` ${l.serial}${l.firmware ? `, firmware ${l.firmware}` : ""}`) : null);
  });
  fill(box, el("h2", {}, "Devices"), el("ul", { class: "links" }, items));
}

const ALARM_WORDS = { held: "ROUND HELD", device_down: "DEVICE DOWN", device_fault: "DEVICE FAULT",
  out_of_service: "DECK OUT OF SERVICE", incident: "INCIDENT" };

/** Alarms that stay until handled (the table's own list: held round, device down, deck out of service). */
export function renderAlarms(box, status, offline = false, ctx = null) {
  if (offline) {
    fill(box, el("h2", {}, "Alarms"), el("p", { id: "alarms-unknown" }, badge("off", "unknown while the table does not answer")));
    return;
  }
  const alarms = Status.alarms(status);
  if (!alarms.length) {
    fill(box, el("h2", {}, "Alarms"), el("p", { id: "no-alarms" }, badge("ok", "none")));
    return;
  }
  // The incidents the table raised stand until a supervisor acknowledges them: on the supervisor's
  // screen the button is here, beside them, so it works whether or not this screen saw them happen
  // (signed in after a restart; a table that keeps no journal has no event stream).
  const incidents = alarms.filter((a) => a.kind === "incident").length;
  const ack = ctx && ctx.me && ctx.me.role === "supervisor" && incidents
    ? el("p", {}, el("button", { id: "ack-incidents", class: "small",
      onclick: () => ctx.act("acknowledge_incident", {}, "ack-incidents") },
    incidents === 1 ? "Acknowledge the incident" : `Acknowledge the ${incidents} incidents`),
    besideError(ctx.errors, "ack-incidents")) : null;
  fill(box, el("h2", {}, "Alarms"), el("ul", { class: "alarms", role: "list" }, alarms.map((a) => el("li", {
    class: "alarm", "data-alarm": a.kind }, badge("bad", ALARM_WORDS[a.kind] || String(a.kind).toUpperCase()), " ",
  tableWords(a.text), a.since ? el("span", { class: "muted" }, ` since ${clock(a.since)}`) : null))), ack);
}
