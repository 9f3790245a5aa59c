// The panels both screens show: what the table waits for, the seats and the dealer's
// hand, the decks, the devices' links, and the alarms. Each is rendered whole from the
// model and the status (nothing else is kept in the page).

import { Status } from "./model.js";
import { badge, cardEl, clock, el, fill, handHeadline, money, placeWords, stateWords, wagerName,
  wagerWords } from "./ui.js";

const DEALER_ACTIONS = new Set(["close_bets", "confirm_collect"]);
const BUTTON_WORDS = { close_bets: "Close bets", confirm_collect: "Confirm the collect" };
const ROLE_WORDS = { dealer: "the dealer", supervisor: "a supervisor", device: "the dealer, at the devices" };

/** What the table waits for, in words, with the one button that does it (when it is this person's). */
export function renderNow(box, status, me, act) {
  const w = Status.waitingFor(status);
  const round = Status.round(status);
  const head = el("p", { class: "now-step" }, round ? `Round ${round.number ?? ""}: ${stateWords(round.state)}`
    : "Between rounds");
  if (!w) {
    fill(box, head, el("p", { class: "now-what", id: "now-what", "data-waiting-action": "" },
      status ? "The table is working: nothing to do." : "Connecting to the table…"));
    return;
  }
  const mine = w.role === "dealer" ? ["dealer", "supervisor"].includes(me.role) : w.role === me.role;
  const what = el("p", { class: "now-what", id: "now-what", "data-waiting-action": w.action || "",
    "data-waiting-role": w.role || "", "data-waiting-colour": w.colour || "" },
  `The table waits for ${w.what}.`);
  const who = el("p", { class: "now-who" }, `Who: ${ROLE_WORDS[w.role] || w.role}`);
  let button = null;
  if (mine && DEALER_ACTIONS.has(w.action)) {
    button = el("button", { class: "big primary", id: "do-now", onclick: () => act(w.action, {}) },
      BUTTON_WORDS[w.action]);
  } else if (w.action === "decide") {
    button = el("p", { class: "now-hint" }, w.seat ? `Seat ${w.seat}: press Play or Fold on the seat.`
      : "Press Play or Fold on each seat in turn, from seat 1.");
  } else if (w.role === "supervisor" && me.role === "supervisor") {
    button = el("a", { class: "big link-button", href: "/supervisor.html" }, "Open the supervisor's screen");
  }
  fill(box, head, what, who, button);
}

function seatWagers(wagers) {
  return Object.entries(wagers || {}).filter(([, v]) => v > 0)
    .map(([k, v]) => el("li", { "data-wager-placed": k }, `${wagerName(k)} ${money(v)}`));
}

function slots(cards, n = 3) {
  const out = (cards || []).map((c) => cardEl(c.face));
  while (out.length < n) out.push(cardEl(null, { empty: true }));
  return out;
}

/** The seats (wagers, cards face down until decisions are final, decisions, results) and the dealer's hand. */
export function renderSeats(box, model, status, me, act) {
  const r = model.round;
  if (!r) {
    fill(box, el("p", { class: "muted" }, "No round yet."));
    return;
  }
  const w = Status.waitingFor(status);
  const deciding = w && w.action === "decide" && ["dealer", "supervisor"].includes(me.role) && !r.decisionsFinal;
  const seats = r.seats.map((s) => {
    const result = r.results && r.results[s];
    const decision = r.decisions[s];
    let buttons = null;
    if (deciding && !decision && (!w.seat || w.seat === s)) {
      buttons = el("div", { class: "decide" },
        el("button", { class: "big play", id: `play-${s}`, "aria-label": `Seat ${s} plays`,
          onclick: () => act("decide", { seat: s, decision: "play" }) }, "Play"),
        el("button", { class: "big fold", id: `fold-${s}`, "aria-label": `Seat ${s} folds`,
          onclick: () => act("decide", { seat: s, decision: "fold" }) }, "Fold"));
    }
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
      el("ul", { class: "placed" }, seatWagers(r.wagers[s])),
      el("div", { class: "cards", "aria-label": `seat ${s}'s cards` }, slots(r.cards[s])),
      el("p", { class: "decision", "data-decision": decision || "" },
        decision ? (decision === "play" ? "plays" : "folds") : (r.decisionsFinal ? "" : "decision: —")),
      buttons, outcome);
  });
  const dealer = el("section", { class: "seat dealer", "data-seat": "dealer", "aria-label": "Dealer's hand" },
    el("h3", {}, "Dealer"),
    el("div", { class: "cards", "aria-label": "the dealer's cards" }, slots(r.dealer)),
    el("p", { class: "decision" }, r.dealerHand ? (r.qualifies ? "qualifies (queen high or better)"
      : "does not qualify") : "sealed until every seat has decided"));
  const title = el("h2", {}, `Round ${r.number}`, r.held ? " — HELD" : "", r.voided ? " — VOIDED" : "",
    r.closed && !r.voided ? " — closed" : "");
  fill(box, title, el("div", { class: "seats" }, dealer, seats));
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
export function renderLinks(box, status) {
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

const ALARM_WORDS = { held: "ROUND HELD", device_down: "DEVICE DOWN", out_of_service: "DECK OUT OF SERVICE",
  incident: "INCIDENT" };

/** Alarms that stay until handled (the table's own list: held round, device down, deck out of service). */
export function renderAlarms(box, status) {
  const alarms = Status.alarms(status);
  if (!alarms.length) {
    fill(box, el("h2", {}, "Alarms"), el("p", { id: "no-alarms" }, badge("ok", "none")));
    return;
  }
  fill(box, el("h2", {}, "Alarms"), el("ul", { class: "alarms", role: "list" }, alarms.map((a) => el("li", {
    class: "alarm", "data-alarm": a.kind }, badge("bad", ALARM_WORDS[a.kind] || String(a.kind).toUpperCase()), " ",
  a.text, a.since ? el("span", { class: "muted" }, ` since ${clock(a.since)}`) : null))));
}
