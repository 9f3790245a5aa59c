// The history panel (dealer's and supervisor's screens): the last rounds with their
// results and the incidents with who handled them, from the table API's `history` query,
// newest first, a page at a time. Sealed as everything else: the table sends a round's
// results only once it is settled, after its reveal (58 Pa. Code 816a.1), and never a card.

import { badge, clock, count, el, fill, money, tableWords } from "./ui.js";

const OUTCOME = { settled: ["ok", "settled"], voided: ["warn", "VOIDED"], held: ["bad", "HELD"],
  in_progress: ["info", "in progress"] };

function roundLine(r) {
  const [kind, words] = OUTCOME[r.outcome] || ["off", r.outcome];
  const parts = [];
  if (r.outcome === "settled" && r.net_cents) {
    parts.push(Object.entries(r.net_cents).map(([s, c]) => `seat ${s} ${money(c, true)}`).join(", "));
    parts.push(`house ${money(r.house_cents, true)}`);
  } else if (r.outcome === "voided" && r.voided) {
    parts.push(`wagers returned; ${tableWords(r.voided.reason) || "no reason given"}`
      + (r.voided.supervisors.length ? ` (by ${r.voided.supervisors.join(" and ")})` : ""));
  } else if (r.outcome === "held") {
    const h = r.holds[r.holds.length - 1];
    parts.push(h ? tableWords(h.reason) : "");
  } else if (r.bets_open) { // its seats are the bets placed so far, shown above: not "0 seats"
    parts.push("bets open");
  } else {
    parts.push(count(r.seats.length, "seat"));
  }
  if (r.released_by.length && r.outcome !== "held") parts.push(`released by ${r.released_by.join(", ")}`);
  return el("li", { class: "history-round", "data-round": r.round_id, "data-outcome": r.outcome },
    el("strong", {}, `Round ${r.number}`), " ", badge(kind, words), " ", el("span", { class: "muted" }, clock(r.opened)),
    el("br"), parts.filter(Boolean).join("; "));
}

function incidentLine(i) {
  const handled = i.handled_by.length
    ? i.handled_by.map((h) => `${h.action} by ${h.supervisor || "?"}`).join(", ")
    : "not handled yet";
  // A void asked and not yet confirmed handles nothing yet: still open (amber), with who asked.
  const done = i.handled_by.some((h) => h.action !== "asked for a void");
  return el("li", { class: "history-incident", "data-incident-seq": i.seq, "data-handled": done ? "yes" : "no" },
    badge(done ? "ok" : "warn", clock(i.ts)), " ", tableWords(i.what), el("br"),
    el("span", { class: "muted" }, handled));
}

/** A history panel in `box`; `request` sends a table API request. Call refresh() when the table moved on. */
export class HistoryPanel {
  constructor(box, request) {
    this.box = box;
    this.request = request;
    this.pages = [null]; // the `before` of each page seen; the last is the one shown
    this.page = null;
    this.error = null;
    this.asking = false;
    this.again = false;
  }

  async refresh() {
    if (this.asking) { this.again = true; return; }
    this.asking = true;
    try {
      const before = this.pages[this.pages.length - 1];
      const reply = await this.request({ action: "history", limit: 8, ...(before === null ? {} : { before }) });
      if (reply.ok) { this.page = reply.history; this.error = null; } else this.error = reply.error;
    } catch (err) {
      this.error = null; // not connected: the page says so in its banner; asked again later
    } finally {
      this.asking = false;
      this.render();
      if (this.again) { this.again = false; this.refresh(); }
    }
  }

  render() {
    const h = this.page;
    const older = el("button", { class: "small", id: "history-older", disabled: !h || h.next_before === null,
      onclick: () => { this.pages.push(h.next_before); this.refresh(); } }, "Older");
    const newer = el("button", { class: "small", id: "history-newer", disabled: this.pages.length < 2,
      onclick: () => { this.pages.pop(); this.refresh(); } }, "Newer");
    if (this.error) { fill(this.box, el("h2", {}, "History"), el("p", { class: "refused" }, this.error)); return; }
    if (!h) { fill(this.box, el("h2", {}, "History"), el("p", { class: "muted" }, "asking the table…")); return; }
    fill(this.box, el("h2", {}, "History"),
      el("h3", {}, "Rounds"),
      h.rounds.length ? el("ul", { class: "history", id: "history-rounds" }, h.rounds.map(roundLine))
        : el("p", { class: "muted", id: "history-rounds" }, "No round yet."),
      el("h3", {}, "Incidents"),
      h.incidents.length ? el("ul", { class: "history", id: "history-incidents" }, h.incidents.map(incidentLine))
        : el("p", { id: "history-incidents" }, badge("ok", "none in these rounds")),
      el("p", { class: "pager" }, newer, " ", older));
  }
}
