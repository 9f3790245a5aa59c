// What every console page does first: find the session (or send the person to sign in),
// connect to the table, apply events to the model, keep the status fresh, and redraw
// once per animation frame.

import { TableConnection, sessionGone, signOut, whoami } from "./api.js";
import { Status, TableModel } from "./model.js";
import { badge, el, fill, learnKinds } from "./ui.js";

const STATUS_POLL_MS = 1000; // deck moves and link changes are not events: the status is asked for too

/**
 * Start a page. `allowed`: roles that may use it; `render(ctx)`: redraw from ctx.model and
 * ctx.status. Resolves to the context {me, model, status, act, request, say}.
 */
export async function boot({ allowed, render }) {
  const me = await whoami();
  if (!me) {
    location.replace(`/?next=${encodeURIComponent(location.pathname)}`);
    return null;
  }
  if (!allowed.includes(me.role)) {
    fill(document.querySelector("main"), el("p", { class: "refused", role: "alert" },
      `This screen is for ${allowed.join(" or ")}; ${me.person} is signed in as ${me.role}.`),
    el("p", {}, el("a", { href: "/" }, "Sign in as someone else")));
    return null;
  }
  const model = new TableModel();
  // offline: the table does not answer (its last words are not shown as current);
  // signedOut: the table answers but no longer knows this session (a restart): sign in again.
  const ctx = { me, model, status: null, connection: null, offline: false, signedOut: false };
  const header = document.getElementById("who");
  const link = document.getElementById("connection");
  const messages = document.getElementById("messages");
  let frame = 0;
  const redraw = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      learnKinds(Status.kinds(ctx.status));
      render(ctx);
      model.perf.shown();
    });
  };
  ctx.redraw = redraw;
  /** A line in the messages region (aria-live: read out to screen readers). */
  ctx.say = (text, kind = "info") => {
    const line = el("li", { class: `message ${kind}`, "data-kind": kind }, badge(kind === "bad" ? "bad" : "ok",
      kind === "bad" ? "refused" : "done"), " ", text);
    messages.prepend(line);
    while (messages.children.length > 6) messages.lastElementChild.remove();
  };
  ctx.request = (req) => ctx.connection.request(req);
  /** Errors shown beside the button that caused them: place (the button's id) -> the
   *  table's words; cleared by that button's next success. */
  ctx.errors = {};
  const beside = (place) => {
    const box = place && document.getElementById(`${place}-error`);
    if (box && box.dataset.static === "yes") { box.textContent = ctx.errors[place] || ""; box.hidden = !ctx.errors[place]; }
  };
  /** Send a command; say the table's answer (accepted, or refused with its reason), in the
   *  messages and, when `place` names the button that sent it, beside that button. */
  ctx.act = async (action, args = {}, place = null) => {
    const words = action.replace(/_/g, " ");
    const refused = (error) => {
      ctx.say(`${words}: ${error}`, "bad");
      if (place) { ctx.errors[place] = `Refused: ${error}`; beside(place); }
    };
    try {
      const reply = await ctx.connection.request({ action, ...args });
      if (reply.ok) {
        ctx.say(`${words}: accepted`);
        if (place) { delete ctx.errors[place]; beside(place); }
        if (action === "decide" && model.round) model.decided(model.round.id, args.seat, args.decision);
      } else refused(reply.error);
      const status = await ctx.connection.request({ action: "status" });
      if (status.ok) { ctx.status = Status.between(ctx.status, status); redraw(); }
      return reply;
    } catch (err) {
      refused(err.message);
      redraw();
      return { ok: false, error: err.message };
    }
  };
  // Signed out only when the table says so: a page that looked signed out while the session
  // lived on would hand the next person at the screen this one's session.
  const signOutError = el("span", { id: "sign-out-error", class: "refused", role: "alert" });
  fill(header, el("span", {}, `${me.person} (${me.role})`), " ",
    el("button", { class: "small", id: "sign-out", onclick: async () => {
      signOutError.textContent = "";
      try {
        await signOut();
      } catch (err) {
        signOutError.textContent = `Not signed out: ${err.message}; sign out again`;
        return;
      }
      location.replace("/");
    } }, "Sign out"), " ", signOutError);
  ctx.connection = new TableConnection({
    onEvent: (ev) => { model.apply(ev); redraw(); },
    onStatus: (status) => { ctx.status = Status.between(ctx.status, status); redraw(); },
    onState: (state, detail) => {
      const words = { live: badge("ok", detail ? `live (${detail})` : "live"), connecting: badge("warn", detail ? `connecting… (${detail})` : "connecting…"),
        offline: badge("bad", "OFFLINE: reconnecting"), signed_out: badge("bad", "session ended: sign in again"),
        error: badge("bad", `error: ${detail || ""}`) };
      if (ctx.signedOut && state !== "signed_out") return;
      fill(link, words[state] || state);
      link.dataset.state = state;
      if (state === "live") { ctx.offline = false; ctx.statusOnly = Boolean(detail); redraw(); return; }
      if (state === "offline" || state === "signed_out") {
        if (!ctx.offline) { ctx.offline = true; ctx.status = null; redraw(); }
        // The table answers HTTP but refuses the WebSocket: ask whether it still knows this
        // session (after a restart it does not: sign in again, said at once, not retried for good).
        if (state === "signed_out") sessionEnded();
        else sessionGone().then((gone) => { if (gone) sessionEnded(); }).catch(() => {});
      }
    },
  }).start();
  function sessionEnded() {
    if (ctx.signedOut) return;
    ctx.signedOut = true;
    ctx.connection.close();
    fill(link, badge("bad", "session ended: sign in again"));
    link.dataset.state = "signed_out";
    redraw();
  }
  setInterval(async () => {
    if (document.hidden || ctx.offline) return;
    try {
      const status = await ctx.connection.request({ action: "status" });
      if (status.ok) { ctx.status = Status.between(ctx.status, status); redraw(); }
    } catch { /* not connected: the connection reconnects by itself */ }
  }, STATUS_POLL_MS);
  window.threecard = ctx; // for benches and people debugging at the table
  redraw();
  return ctx;
}
