// The dealer's screen (1280x800 touchscreen): what the table waits for and its one
// button, the seats, the dealer's hand (sealed until decisions are final: 58 Pa. Code
// 816a.1; the page never receives it before then), decks, devices, alarms.

import { betsKey, renderBets } from "./bets.js";
import { boot } from "./boot.js";
import { Status } from "./model.js";
import { renderAlarms, renderDecks, renderLinks, renderNow, renderSeats } from "./panels.js";
import { el, fill, panel } from "./ui.js";

const $ = (id) => document.getElementById(id);

function render(ctx) {
  const { model, status, me, act } = ctx;
  const w = Status.waitingFor(status);
  panel($("table-id"), [model.tableId], (box) => fill(box, model.tableId ? `table ${model.tableId}` : ""));
  panel($("now"), [w, Status.round(status), status === null], (box) => renderNow(box, status, me, act));
  panel($("bets"), betsKey(ctx), (box) => renderBets(box, ctx, ctx.redraw));
  panel($("round"), [model.round, w], (box) => renderSeats(box, model, status, me, act));
  panel($("alarms"), [Status.alarms(status)], (box) => renderAlarms(box, status));
  panel($("decks"), [Status.decks(status)], (box) => renderDecks(box, status));
  panel($("links"), [Status.links(status)], (box) => renderLinks(box, status));
}

boot({ allowed: ["dealer", "supervisor"], render }).then((ctx) => {
  if (ctx && ctx.me.role === "supervisor") {
    fill($("nav"), el("a", { href: "/supervisor.html", id: "to-supervisor" }, "Supervisor's screen"));
  }
});
