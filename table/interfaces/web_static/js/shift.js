// The shift page of the supervisor's screen: the table's gaming day
// (open or closed, the shift, the last slip), the procedures by people (shift_forms.js),
// and the shift's or day's report read from the journal (`day_report`, the figures of
// `tablectl report --json`) with its plot (shift_plot.js), a print stylesheet for the
// copy a regulator files, and the report signed by the table key as a download.
// After a restart the page says "sign in again" (boot.js) and reads the state afresh.

import { boot } from "./boot.js";
import { PROCEDURES, dollars, procedureForm, tableDayDefault } from "./shift_forms.js";
import { shiftPlot } from "./shift_plot.js";
import { badge, el, fill, panel, wagerName } from "./ui.js";

const $ = (id) => document.getElementById(id);
const ORDER = { closed: ["open", "drop", "shift_change", "fill", "credit", "close"],
  open: ["fill", "credit", "shift_change", "close", "open", "drop"] };

let report = null; // the last report shown: {period, gaming_day, data}
let built = false;

function dayOf(status) {
  return status && status.table_day && typeof status.table_day === "object" ? status.table_day : null;
}

function renderState(box, ctx) {
  const day = dayOf(ctx.status);
  const key = ctx.signedOut ? "signed-out" : ctx.offline ? "offline" : day ? JSON.stringify(day) : ctx.status ? "none" : "wait";
  panel(box, key, () => {
    if (ctx.signedOut) {
      fill(box, el("p", { class: "now-what", id: "day-open", "data-open": "unknown" }, "Session ended"),
        el("p", { class: "refused" }, "The table restarted or your session ended: ",
          el("a", { href: "/?again&next=/shift.html", id: "sign-in-again" }, "sign in again")));
      return;
    }
    if (ctx.offline || !ctx.status) {
      fill(box, el("p", { class: "now-what", id: "day-open", "data-open": "unknown" },
        ctx.offline ? "The table does not answer" : "Asking the table…"));
      return;
    }
    if (!day) {
      fill(box, el("p", { class: "now-what", id: "day-open", "data-open": "unknown" }, "Gaming day not reported"),
        el("p", { class: "muted" }, "This table's status says nothing of its gaming day (an older table)."));
      return;
    }
    const last = day.last_slip;
    fill(box,
      el("p", { class: "now-what", id: "day-open", "data-open": day.open ? "open" : "closed" },
        day.open ? badge("ok", "Table OPEN") : badge("off", "Table CLOSED"),
        day.open && day.shift ? el("span", { id: "day-shift", "data-shift": day.shift }, ` · shift ${day.shift}`) : null),
      el("p", { class: "now-step" }, day.required
        ? (day.open ? "Rounds may be dealt." : "No round is dealt on a closed table: open it first.")
        : "Rounds are dealt open or closed (this table does not require the procedures)."),
      last ? el("p", { class: "now-who", id: "day-last-slip" }, "Last slip: ", slipLine(last)) : null);
  });
}

function slipLine(s) {
  if (typeof s !== "object" || s === null) return `no. ${s}`; // the status names the last slip by its number
  const total = s.total ?? s.amount;
  return [String(s.procedure || "").replace(/_/g, " "), s.slip !== undefined ? `no. ${s.slip}` : null,
    Number.isFinite(total) ? dollars(total) : null].filter(Boolean).join(" · ");
}

function buildProcedures(ctx) {
  const box = $("procedures");
  const submit = async (name, req) => {
    const reply = await ctx.request({ action: "table_procedure", procedure: name, ...req });
    const status = await ctx.request({ action: "status" }).catch(() => null);
    if (status && status.ok) { ctx.status = status; ctx.redraw(); }
    if (reply.ok) {
      ctx.say(`${PROCEDURES[name].title}: journaled`);
      if (report) showReport(ctx, report.period, report.gaming_day);
    } else ctx.say(`${PROCEDURES[name].title}: ${reply.error}`, "bad");
    return reply;
  };
  const disabled = ctx.me.role !== "supervisor"; // the table refuses them anyway
  fill(box, Object.keys(PROCEDURES).map((name) => procedureForm(name, submit, { disabled })));
  built = true;
}

function orderProcedures(ctx) {
  const day = dayOf(ctx.status);
  const state = day ? (day.open ? "open" : "closed") : null;
  const box = $("procedures");
  if (!state || box.dataset.state === state) return;
  const first = !box.dataset.state;
  box.dataset.state = state;
  for (const name of ORDER[state]) {
    const section = $(`proc-${name}-panel`);
    const now = PROCEDURES[name].when === state;
    section.classList.toggle("applies", now);
    // What applies now is unfolded; at the first sight the rest is folded, later a fold a person
    // opened (the slip just journaled, said beside its button) stays open.
    if (now) section.open = true;
    else if (first) section.open = false;
    $(`proc-${name}-when`).textContent = now ? "" : ` (when the table is ${PROCEDURES[name].when})`;
    box.append(section); // what applies now first
  }
}

function figure(label, value, attrs = {}) {
  return el("tr", attrs, el("th", { scope: "row" }, label), el("td", {}, value));
}

function band(e) {
  return `${dollars(Math.round(e.band_95[0]))} to ${dollars(Math.round(e.band_95[1]))}`;
}

function reportTable(r) {
  const d = r.decisions || {};
  const st = r.statistical || {};
  const wagers = el("table", { class: "wagers", id: "report-wagers" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Wager"), el("th", { scope: "col" }, "Handle"),
      el("th", { scope: "col" }, "House result"))),
    el("tbody", {}, Object.keys(r.house_result || {}).map((k) => el("tr", {}, el("th", { scope: "row" }, wagerName(k)),
      el("td", {}, r.handle && k in r.handle ? dollars(r.handle[k]) : "—"),
      el("td", {}, r.house_result && k in r.house_result ? dollars(r.house_result[k]) : "—")))));
  const e = r.expected_win, t = r.theoretical_win;
  const facts = el("table", { class: "facts report-facts", id: "report-facts" },
    figure("rounds", r.rounds, { id: "report-rounds", "data-rounds": r.rounds }),
    figure("hands", `${r.hands} (${d.play ?? 0} played, ${d.fold ?? 0} folded)`),
    figure("settled win", dollars(r.settled_win), { id: "report-settled", "data-cents": r.settled_win }),
    e ? figure("expected win given the decisions", `${dollars(Math.round(e.cents))}; 95 % band ${band(e)}`
      + (e.outside ? " — OUTSIDE" : ""), { id: "report-expected", "data-outside": e.outside ? "yes" : "no" }) : null,
    t ? figure("theoretical win (Q-6-4 play)", `${dollars(Math.round(t.cents))}; 95 % band ${band(t)} (approximate)`
      + (t.outside ? " — OUTSIDE" : "")) : null,
    figure("statistical win", st.known
      ? `${dollars(st.win)} (opening ${dollars(st.opening)}, closing ${dollars(st.closing)}, fills ${dollars(st.fills)}, `
        + `credits ${dollars(st.credits)}, drop ${dollars(st.drop)}`
        + (st.win_to_drop !== null && st.win_to_drop !== undefined ? `, win to drop ${(st.win_to_drop * 100).toFixed(2)} %` : "")
        + `; ${st.difference_from_settled ? `differs from the settled win by ${dollars(st.difference_from_settled)}` : "equals the settled win"})`
      : `not known: ${st.why || ""}`, { id: "report-statistical", "data-known": st.known ? "yes" : "no" }),
    figure("voids, incidents, deck changes", `${r.voids ?? 0}, ${r.incidents ?? 0}, ${r.deck_changes ?? 0}`),
    figure("device downtime", `${r.device_downtime_s ?? 0} s`));
  return [facts, wagers];
}

function periodName(r) {
  if (r.period === "shift") return `shift ${r.shift} of gaming day ${r.gaming_day}`;
  if (r.period === "day") return `gaming day ${r.gaming_day}`;
  return r.period || "";
}

function renderReport(r) {
  const flags = r.flags || [];
  fill($("report-body"),
    el("div", { class: "print-head" }, el("h3", {}, `Table ${r.table_id}: ${periodName(r)}`),
      el("p", {}, `Profile ${r.profile}; paytables ${Object.values(r.paytables || {}).join(", ")}; `
        + `the gaming day starts ${r.gaming_day_starts}. Printed ${new Date().toLocaleString()}.`)),
    el("p", { id: "report-shown", "data-period": r.period }, el("strong", {}, periodName(r))),
    // each stretch of rounds under its own paytables, as the journal records them in force
    el("ul", { id: "report-in-force" }, (r.in_force || []).map((p) => el("li", {},
      `In force, rounds ${p.first_round}-${p.last_round}: ${Object.values(p.paytables).join(", ")}; profile ${p.profile}`
        + (p.progressive_meter_cents.length ? `; meter ${p.progressive_meter_cents.map(dollars).join(", ")}` : "")))),
    (r.pricing || {}).older_format
      ? el("p", { id: "report-older", class: "refused" }, `Older journal: ${r.pricing.older_format}`) : null,
    flags.length
      ? el("ul", { class: "alarms", id: "report-flags" }, flags.map((f) => el("li", { class: "alarm" }, badge("bad", "FLAG"), " ", f)))
      : el("p", { id: "report-flags", "data-flags": 0 }, badge("ok", "nothing flagged")),
    el("figure", { class: "plot" }, shiftPlot(r.series, dollars),
      el("figcaption", {}, el("ul", { class: "legend" },
        el("li", {}, el("span", { class: "key settled", "aria-hidden": "true" }), "settled win, cumulative"),
        el("li", {}, el("span", { class: "key expected", "aria-hidden": "true" }), "expected given the decisions"),
        el("li", {}, el("span", { class: "key band", "aria-hidden": "true" }), "95 % band"),
        el("li", {}, "✕ a round ending outside the band")))),
    reportTable(r),
    el("div", { class: "print-only signatures" },
      el("p", {}, "Reviewed by (supervisor): ______________________  Date: ____________"),
      el("p", {}, "The signed copy of this report (the table's Ed25519 signature) is checked with "
        + "tablectl audit report FILE --public-key TABLE.pub.")));
}

let reportAsked = 0; // the newest report asked for: a slower answer to an older ask is dropped

async function showReport(ctx, period, day) {
  const ask = ++reportAsked;
  const error = $("report-error");
  error.textContent = "";
  const req = { action: "day_report", period };
  if (day) req.gaming_day = day;
  let reply;
  try {
    reply = await ctx.request(req);
  } catch (err) {
    if (ask === reportAsked) error.textContent = `not sent: ${err.message}`;
    return;
  }
  if (ask !== reportAsked) return; // the person (or a journaled slip) asked again meanwhile
  if (!reply.ok) { error.textContent = reply.error || "refused"; return; }
  const r = reply.report && typeof reply.report === "object" ? reply.report : reply;
  report = { period, gaming_day: day, data: r };
  renderReport(r);
}

async function download(period, day) {
  const error = $("report-error");
  error.textContent = "";
  const q = new URLSearchParams({ period });
  if (day) q.set("gaming_day", day);
  const resp = await fetch(`/api/v1/report/signed?${q}`, { credentials: "same-origin", cache: "no-store" });
  if (!resp.ok) {
    const body = await resp.json().catch(() => ({}));
    error.textContent = resp.status === 401 ? "your session ended: sign in again" : body.error || `refused (${resp.status})`;
    return;
  }
  const blob = await resp.blob();
  const m = /filename="([^"]+)"/.exec(resp.headers.get("content-disposition") || "");
  const name = m ? m[1] : "report.signed.json";
  const a = el("a", { href: URL.createObjectURL(blob), download: name, id: "report-saved-link" });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 10_000);
  error.textContent = "";
  $("report-body").prepend(el("p", { id: "report-saved", class: "done" }, `Saved ${name} (${blob.size} bytes), `
    + "signed by the table's key: tablectl audit report FILE --public-key TABLE.pub checks it."));
}

function wireReport(ctx) {
  const period = () => $("report-period").value;
  const day = () => $("report-day").value || null;
  $("report-form").addEventListener("submit", (ev) => { ev.preventDefault(); showReport(ctx, period(), day()); });
  $("report-print").addEventListener("click", () => window.print());
  $("report-download").addEventListener("click", () => download(period(), day()).catch((err) => {
    $("report-error").textContent = `not saved: ${err.message}`;
  }));
  for (const id of ["report-show", "report-print", "report-download"]) $(id).disabled = false; // heard now (shift.html)
}

function render(ctx) {
  if (ctx.status && ctx.status.table_id) $("table-id").textContent = ctx.status.table_id;
  if (!built) { buildProcedures(ctx); wireReport(ctx); }
  renderState($("day-state"), ctx);
  tableDayDefault(dayOf(ctx.status));
  orderProcedures(ctx);
}

boot({ allowed: ["supervisor", "auditor"], render });
