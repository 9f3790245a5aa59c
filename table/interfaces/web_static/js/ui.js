// Small helpers shared by the pages: building elements (never from HTML strings, so
// nothing a message carries is parsed as markup), cards, money and words.

/** An element: el("button", {class: "big", onclick: f, "aria-label": "..."}, child, "text", ...). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** Replace a container's children (a whole panel re-rendered from the model). */
export function fill(container, ...children) {
  container.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

const SUITS = { s: ["♠", "spades"], h: ["♥", "hearts"], d: ["♦", "diamonds"], c: ["♣", "clubs"] };
const RANKS = { A: "ace", K: "king", Q: "queen", J: "jack", T: "10", "10": "10" };

/** A card's face for people: {symbol: "Q♠", rank: "Q", suit: "s", words: "queen of spades", red}. */
export function cardFace(text) {
  const m = /^(10|[2-9TJQKA])([shdc])$/.exec(String(text));
  if (!m) return { symbol: "?", rank: "?", suit: "", words: "unknown card", red: false };
  const rank = m[1] === "T" ? "10" : m[1];
  const [sym, suit] = SUITS[m[2]];
  return { symbol: `${rank}${sym}`, rank, suit: m[2], words: `${RANKS[rank] || rank} of ${suit}`,
           red: m[2] === "h" || m[2] === "d" };
}

const BACKS = new Set(["red", "blue", "green", "black", "grey", "purple", "orange", "brown"]);

/** A card: face down (read, not yet shown: 816a.1) when `face` is null, in its deck's back
 *  colour (`back`), else its face. */
export function cardEl(face, { empty = false, back = null } = {}) {
  if (empty) return el("span", { class: "card card-empty", role: "img", "aria-label": "no card yet" }, "");
  if (!face) {
    const colour = BACKS.has(back) ? back : "unknown";
    return el("span", { class: `card card-back back-${colour}`, role: "img", "data-back": colour,
      "aria-label": `card read, face down${BACKS.has(back) ? ` (${back} back)` : ""}` }, "▒");
  }
  const f = cardFace(face);
  return el("span", { class: `card card-face${f.red ? " red" : ""}${f.rank.length > 1 ? " wide" : ""}`, role: "img",
    "aria-label": f.words, "data-card": face }, el("span", { class: "rank" }, f.rank), suitEl(f.suit));
}

// The four suits drawn, not set in a font: a table PC whose only font with U+2660..2667 is a
// colour-emoji one drew them wider than the card and in the emoji's own colours (seen in CI).
const SUIT_PATHS = {
  s: "M12 2C9 6 3 9.5 3 14a4.5 4.5 0 0 0 8 2.8L9.5 22h5L13 16.8a4.5 4.5 0 0 0 8-2.8c0-4.5-6-8-9-12z",
  h: "M12 21C8 17.5 2.5 13.5 2.5 8.5a4.75 4.75 0 0 1 9.5-1.5 4.75 4.75 0 0 1 9.5 1.5c0 5-5.5 9-9.5 12.5z",
  d: "M12 2l8 10-8 10-8-10z",
  c: "M12 2.5a4.3 4.3 0 0 0-3.6 6.7A4.3 4.3 0 1 0 11 16.6L9.5 22h5L13 16.6a4.3 4.3 0 1 0 2.6-7.4A4.3 4.3 0 0 0 12 2.5z",
};

/** A suit as an inline SVG in the text's colour (``currentColor``), hidden from screen readers:
 *  the card's aria-label says it in words. */
export function suitEl(suit) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", `suit suit-${suit}`);
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.dataset.suit = suit;
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", SUIT_PATHS[suit] || "");
  path.setAttribute("fill", "currentColor");
  svg.append(path);
  return svg;
}

/** "1 round", "3 rounds": a count with its noun, singular for one. */
export function count(n, noun, plural = `${noun}s`) {
  return `${n} ${Number(n) === 1 ? noun : plural}`;
}

/** A table text for people: a card the table keeps sealed (masked "??") said in words. */
export function tableWords(text) {
  return String(text ?? "").replace(/\?\?/g, "a sealed card");
}

/** Cents as money, in dollars as the table's signs say it: 1000 -> "$10.00", 123456 ->
 *  "$1,234.56"; signed when asked: "+$10.00", "−$10.00". */
export function money(cents, signed = false) {
  if (!Number.isFinite(cents)) return "—";
  const abs = Math.abs(cents);
  const text = `$${Math.floor(abs / 100).toLocaleString("en-US")}.${String(abs % 100).padStart(2, "0")}`;
  if (!signed) return text;
  return cents > 0 ? `+${text}` : cents < 0 ? `−${text}` : `±${text}`;
}

// The play wager and the ante bonus are results of the ante, not kinds a seat places; the
// kinds' own words come from the table (table/rules/kinds.py, learnKinds).
const WAGER_NAMES = { play: "play", ante_bonus: "ante bonus" };

/** Take the wager kinds' words from the table's status (`Status.kinds`), for wagerName. */
export function learnKinds(kinds) {
  for (const k of kinds || []) if (k && typeof k.key === "string" && typeof k.label === "string") WAGER_NAMES[k.key] = k.label;
}
const OUTCOME_WORDS = { win: "wins", lose: "loses", push: "push", returned: "returned" };

export function wagerName(w) { return WAGER_NAMES[w] || String(w).replace(/_/g, " "); }

/** One wager's result in words: "ante bonus 1 to 1 (straight): wins +10.00". */
export function wagerWords(w) {
  const name = wagerName(w.wager);
  const pay = w.payout ? ` ${w.payout}` : "";
  const line = w.line && w.wager !== "ante_bonus" ? ` (${w.line})` : "";
  return `${name}${pay}${line}: ${OUTCOME_WORDS[w.outcome] || w.outcome} ${money(w.amount, true)}`;
}

/** A seat's result headline: the hand's name, then each paying line: "straight, ante bonus 1 to 1". */
export function handHeadline(result) {
  const hand = (result && result.hand && result.hand.category) || "";
  const lines = (result.wagers || []).filter((w) => w.payout).map((w) => `${wagerName(w.wager)} ${w.payout}`);
  return [hand, ...lines].filter(Boolean).join(", ");
}

const PLACE_WORDS = {
  off_table: "off the table", in_shuffler: "in the shuffler", shuffling: "being shuffled",
  verified: "shuffled and counted, in the shuffler", delivered: "out of the shuffler", in_shoe: "in the shoe",
  in_play: "in play", in_discard_rack: "in the discard rack", out_of_service: "OUT OF SERVICE",
};
export function placeWords(p) { return PLACE_WORDS[p] || String(p || "unknown").replace(/_/g, " "); }

const STATE_WORDS = {
  open_for_bets: "open for bets", bets_closed: "bets closed", dealing: "dealing", decisions: "decisions",
  dealer_reveal: "dealer reveals", settle: "settled", collect: "collecting", closed: "closed", held: "HELD",
  voided: "voided",
};
export function stateWords(s) { return STATE_WORDS[s] || String(s || "").replace(/_/g, " "); }

/** "12:03:04" of an ISO time, in the browser's zone. */
export function clock(ts) {
  const t = Date.parse(ts);
  return Number.isNaN(t) ? "" : new Date(t).toLocaleTimeString();
}

/** A status word with a shape as well as a colour: colour is never the only signal. */
export function badge(kind, words) {
  const marks = { ok: "✔", warn: "▲", bad: "✖", off: "○", info: "●" };
  return el("span", { class: `badge badge-${kind}` }, el("span", { "aria-hidden": "true" }, marks[kind] || "●"), " ",
    words);
}

const panelKeys = new WeakMap();

/**
 * Re-render `container` with build() only when `key` (what it shows) changed, and keep the
 * keyboard focus on the control with the same id: a status refresh never moves the focus.
 */
export function panel(container, key, build) {
  const k = JSON.stringify(key);
  if (panelKeys.get(container) === k) return false;
  panelKeys.set(container, k);
  const focused = document.activeElement && container.contains(document.activeElement)
    ? document.activeElement.id : null;
  build(container);
  if (focused) {
    const again = document.getElementById(focused);
    if (again) again.focus();
  }
  return true;
}

/** The error of the button `place` (its id), shown beside it (ctx.errors; null: none). */
export function besideError(errors, place) {
  const text = errors && errors[place];
  return text ? el("p", { class: "beside-error", id: `${place}-error`, role: "alert", "data-for": place }, text) : null;
}
