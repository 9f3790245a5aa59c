// The dealer's screen (1280x800 touchscreen): what the table waits for and its one
// button, the seats, the dealer's hand (sealed until decisions are final: 58 Pa. Code
// 816a.1; the page never receives it before then), decks, devices, alarms.

import { betsKey, renderBets } from "./bets.js";
import { boot } from "./boot.js";
import { HistoryPanel } from "./history.js";
import { Status } from "./model.js";
import { renderAlarms, renderDecks, renderLinks, renderNow, renderSeats } from "./panels.js";
import { el, fill, panel } from "./ui.js";

const $ = (id) => document.getElementById(id);

let history = null;
let historyKey = null;

function render(ctx) {
  const { model, status, me, act, offline, signedOut } = ctx;
  const w = Status.waitingFor(status);
  panel($("table-id"), [model.tableId], (box) => fill(box, model.tableId ? `table ${model.tableId}` : ""));
  panel($("now"), [w, Status.roundLine(status), Status.links(status), status === null, offline, signedOut, ctx.errors],
    (box) => renderNow(box, status, me, act, { offline, signedOut, screen: "dealer", errors: ctx.errors }));
  panel($("bets"), betsKey(ctx), (box) => renderBets(box, ctx, ctx.redraw));
  panel($("round"), [model.round, w, Status.held(status), status && status.round, Status.bets(status), ctx.errors],
    (box) => renderSeats(box, model, status, me, act, ctx.errors));
  panel($("alarms"), [Status.alarms(status), offline], (box) => renderAlarms(box, status, offline));
  panel($("decks"), [Status.decks(status)], (box) => renderDecks(box, status));
  panel($("links"), [Status.links(status), offline], (box) => renderLinks(box, status, offline));
  // The history is asked again when a round or a hold changes (a few requests a round).
  const key = JSON.stringify([Status.roundsPlayed(status), Status.roundLine(status), model.incidents.length]);
  if (history && status && key !== historyKey) { historyKey = key; history.refresh(); }
}

boot({ allowed: ["dealer", "supervisor"], render }).then((ctx) => {
  if (!ctx) return;
  history = new HistoryPanel($("history"), ctx.request);
  history.render();
  if (ctx.me.role === "supervisor") {
    fill($("nav"), el("a", { href: "/supervisor.html", id: "to-supervisor" }, "Supervisor's screen"));
  }
});
