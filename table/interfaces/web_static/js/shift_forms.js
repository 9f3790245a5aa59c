// The table's procedures by people on the shift page (COMAR 36.05.03.10): open with the
// opening inventory, shift change (closer and opener), fill, credit, close with the closing
// inventory, and the drop after the count. The signed-in supervisor is one signer; the
// dealer countersigns with their id and PIN typed into the form. Each form keeps what was
// typed across status refreshes; the table's answer (or what is wrong with the form) is
// said in words beside the button that was pressed.

import { el } from "./ui.js";

/** The chips of a table's float, in cents (each row: a denomination and a count of chips). */
export const DENOMINATIONS = [100, 500, 2500, 10000, 50000, 100000];

const DOLLARS = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" });

/** Cents as people count money: 125000 -> "$1,250.00". */
export function dollars(cents) {
  if (!Number.isFinite(cents)) return "—";
  return cents < 0 ? `−${DOLLARS.format(-cents / 100)}` : DOLLARS.format(cents / 100);
}

/** "1,250.50", "$25", "25" -> cents; null for anything else (not money, more than 2 decimals). */
export function parseDollars(text) {
  const t = String(text || "").trim().replace(/^\$/, "").replace(/,/g, "");
  if (!/^\d{1,9}(\.\d{1,2})?$/.test(t)) return null;
  const [whole, frac = ""] = t.split(".");
  return Number(whole) * 100 + Number(frac.padEnd(2, "0"));
}

export const PROCEDURES = {
  open: { title: "Open the table", when: "closed", inventory: true, button: "Open the table",
    hint: "The opening inventory: the chips in the tray, by denomination." },
  shift_change: { title: "Shift change", when: "open", inventory: true, opener: true, button: "Change the shift",
    hint: "The outgoing dealer (closer) countersigns the inventory they hand over; the incoming dealer opens." },
  fill: { title: "Fill", when: "open", amount: "Chips brought to the table", button: "Record the fill",
    hint: "Chips brought from the cage to the table." },
  credit: { title: "Credit", when: "open", amount: "Chips taken from the table", button: "Record the credit",
    hint: "Chips taken from the table to the cage." },
  close: { title: "Close the table", when: "open", inventory: true, button: "Close the table",
    hint: "The closing inventory: the chips left in the tray." },
  drop: { title: "Enter the drop", when: "closed", amount: "The drop counted", day: true, button: "Enter the drop",
    hint: "After the count: what the drop box held, for the gaming day it belongs to." },
};

function inventoryRows(id, onChange) {
  const rows = DENOMINATIONS.map((cents) => el("tr", {},
    el("th", { scope: "row" }, el("label", { for: `${id}-count-${cents}` }, `${dollars(cents)} chips`)),
    el("td", {}, el("input", { id: `${id}-count-${cents}`, class: "chips", type: "number", min: 0, step: 1,
      inputmode: "numeric", "data-cents": cents, oninput: onChange, "aria-describedby": `${id}-row-${cents}` })),
    el("td", { id: `${id}-row-${cents}`, class: "row-total" }, "")));
  const other = el("tr", { class: "other" },
    el("th", { scope: "row" }, el("label", { for: `${id}-other-denomination` }, "Other chip, $"),
      el("input", { id: `${id}-other-denomination`, class: "denomination", inputmode: "decimal",
        placeholder: "e.g. 2.50", oninput: onChange, autocomplete: "off" })),
    el("td", {}, el("input", { id: `${id}-other-count`, class: "chips", type: "number", min: 0, step: 1,
      inputmode: "numeric", oninput: onChange, "aria-label": "chips of the other denomination" })),
    el("td", { id: `${id}-row-other`, class: "row-total" }, ""));
  return el("table", { class: "inventory", id: `${id}-inventory` },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Denomination"), el("th", { scope: "col" }, "Chips"),
      el("th", { scope: "col" }, "Value"))),
    el("tbody", {}, rows, other),
    el("tfoot", {}, el("tr", {}, el("th", { scope: "row" }, "Total"), el("td", { id: `${id}-chips` }, "0 chips"),
      el("td", { id: `${id}-total`, class: "total" }, dollars(0)))));
}

/** The inventory typed in form `id`: {inventory: {"2500": 40, ...}, total, chips} or {error}. */
function readInventory(id) {
  const inventory = {};
  let total = 0, chips = 0;
  for (const cents of DENOMINATIONS) {
    const raw = document.getElementById(`${id}-count-${cents}`).value.trim();
    if (raw === "") continue;
    if (!/^\d{1,6}$/.test(raw)) return { error: `the count of ${dollars(cents)} chips must be a whole number` };
    const n = Number(raw);
    if (n > 0) { inventory[String(cents)] = n; total += n * cents; chips += n; }
  }
  const denom = document.getElementById(`${id}-other-denomination`).value.trim();
  const otherRaw = document.getElementById(`${id}-other-count`).value.trim();
  if (denom !== "" || otherRaw !== "") {
    const cents = parseDollars(denom);
    if (!cents) return { error: "the other chip's denomination must be an amount of money, such as 2.50" };
    if (!/^\d{1,6}$/.test(otherRaw)) return { error: `the count of ${dollars(cents)} chips must be a whole number` };
    const n = Number(otherRaw);
    if (n > 0) { inventory[String(cents)] = (inventory[String(cents)] || 0) + n; total += n * cents; chips += n; }
  }
  return { inventory, total, chips };
}

function showTotals(id) {
  for (const cents of DENOMINATIONS) {
    const n = Number(document.getElementById(`${id}-count-${cents}`).value);
    document.getElementById(`${id}-row-${cents}`).textContent = Number.isInteger(n) && n > 0 ? dollars(n * cents) : "";
  }
  const denom = parseDollars(document.getElementById(`${id}-other-denomination`).value);
  const on = Number(document.getElementById(`${id}-other-count`).value);
  document.getElementById(`${id}-row-other`).textContent = denom && Number.isInteger(on) && on > 0
    ? dollars(denom * on) : "";
  const inv = readInventory(id);
  document.getElementById(`${id}-total`).textContent = inv.error ? "—" : dollars(inv.total);
  document.getElementById(`${id}-chips`).textContent = inv.error ? "" : `${inv.chips} chip${inv.chips === 1 ? "" : "s"}`;
}

/** What the form `id` asks the table: {slip, dealer, dealer_pin} or {error} in words. */
function readForm(name, spec) {
  const id = `proc-${name}`;
  const slip = {};
  if (spec.inventory) {
    const inv = readInventory(id);
    if (inv.error) return inv;
    if (!Object.keys(inv.inventory).length && name !== "close") return { error: "enter the chips, by denomination" };
    slip.inventory = inv.inventory;
  }
  if (spec.amount) {
    const cents = parseDollars(document.getElementById(`${id}-amount`).value);
    if (cents === null) return { error: `${spec.amount.toLowerCase()}: enter an amount of money, such as 1,500.00` };
    slip.amount = cents;
  }
  if (spec.day) {
    const day = document.getElementById(`${id}-day`).value;
    if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return { error: "enter the gaming day the drop is for" };
    slip.gaming_day = day;
  }
  let openerPin = null;
  if (spec.opener) {
    const opener = document.getElementById(`${id}-opener`).value.trim();
    openerPin = document.getElementById(`${id}-opener-pin`).value;
    if (!opener || !openerPin) return { error: "the incoming dealer (the opener) signs too: their id and PIN" };
    slip.opener = opener;
  }
  const dealer = document.getElementById(`${id}-dealer`).value.trim();
  const pin = document.getElementById(`${id}-pin`).value;
  if (!dealer || !pin) return { error: "the dealer countersigns: their id and PIN" };
  return openerPin === null ? { slip, dealer, dealer_pin: pin } : { slip, dealer, dealer_pin: pin, opener_pin: openerPin };
}

/** The journaled slip in words: "open, slip 3, $12,500.00, signed by D-4 and S-17". */
export function slipWords(reply, fallback) {
  const s = (reply && typeof reply.slip === "object" && reply.slip) || {};
  const total = s.total ?? s.amount;
  const signers = [s.dealer, s.opener, s.supervisor].filter(Boolean); // a shift change: the incoming dealer too
  const who = signers.length > 2 ? `${signers.slice(0, -1).join(", ")} and ${signers[signers.length - 1]}`
    : signers.join(" and ");
  return [String(s.procedure || fallback).replace(/_/g, " "), s.slip !== undefined ? `slip ${s.slip}` : null,
    Number.isFinite(total) ? dollars(total) : null, s.opener ? `${s.opener} opens shift ${s.shift}` : null,
    s.gaming_day ? `for ${s.gaming_day}` : null, who ? `signed by ${who}` : null].filter(Boolean).join(", ");
}

/** A new id for one ask of a procedure: 128 random bits in hex (crypto.getRandomValues works
 *  on a plain-http table screen too, where crypto.randomUUID does not). */
function requestId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** One procedure's form: its fields, the dealer's countersignature, the button and, beside
 *  it, the table's answer. `submit(name, request)` resolves to the table's reply. */
export function procedureForm(name, submit, { disabled = false } = {}) {
  const spec = PROCEDURES[name];
  const id = `proc-${name}`;
  const error = el("p", { id: `${id}-error`, class: "refused proc-answer", role: "alert" });
  const done = el("p", { id: `${id}-done`, class: "done proc-answer", "aria-live": "polite" });
  const button = el("button", { type: "submit", id: `${id}-button`, class: "primary", disabled }, spec.button);
  const fields = [];
  if (spec.inventory) fields.push(inventoryRows(id, () => showTotals(id)));
  if (spec.amount) {
    fields.push(el("p", {}, el("label", { for: `${id}-amount` }, `${spec.amount} ($)`),
      el("input", { id: `${id}-amount`, inputmode: "decimal", autocomplete: "off", placeholder: "e.g. 1,500.00",
        oninput: (ev) => { const c = parseDollars(ev.target.value); amountSaid.textContent = c === null ? "" : dollars(c); } })));
  }
  const amountSaid = el("span", { id: `${id}-amount-said`, class: "muted" });
  if (spec.amount) fields.push(el("p", { class: "muted" }, "Amount: ", amountSaid));
  if (spec.day) {
    fields.push(el("p", {}, el("label", { for: `${id}-day` }, "For the gaming day"),
      // the table's gaming day (its status), never the browser's date: set by tableDayDefault
      el("input", { id: `${id}-day`, type: "date", value: "",
        oninput: (ev) => { ev.target.dataset.typed = "yes"; } })));
  }
  if (spec.opener) {
    fields.push(el("fieldset", { class: "countersign" }, el("legend", {}, "Incoming dealer (opener) signs"),
      el("p", {}, el("label", { for: `${id}-opener` }, "Incoming dealer's id"),
        el("input", { id: `${id}-opener`, autocomplete: "off", spellcheck: "false", maxlength: 32 })),
      el("p", {}, el("label", { for: `${id}-opener-pin` }, "Incoming dealer's PIN"),
        el("input", { id: `${id}-opener-pin`, type: "password", autocomplete: "off", inputmode: "numeric",
          maxlength: 64 }))));
  }
  const sign = el("fieldset", { class: "countersign" }, el("legend", {},
    spec.opener ? "Outgoing dealer (closer) countersigns" : "The dealer countersigns"),
  el("p", {}, el("label", { for: `${id}-dealer` }, "Dealer's id"),
    el("input", { id: `${id}-dealer`, autocomplete: "off", spellcheck: "false", maxlength: 32 })),
  el("p", {}, el("label", { for: `${id}-pin` }, "Dealer's PIN"),
    el("input", { id: `${id}-pin`, type: "password", autocomplete: "off", inputmode: "numeric", maxlength: 64 })));
  // This form's ask awaiting its answer: {key, id}. Sent again unchanged after no answer came
  // (the connection dropped), it carries the same request_id and the table answers with the slip
  // it journaled the first time instead of making a second (docs/console.md, API 1.6.0).
  let ask = null;
  const form = el("form", { id, class: "proc-form", "data-procedure": name, novalidate: true },
    el("p", { class: "muted" }, spec.hint), fields, sign, el("div", { class: "proc-submit" }, button, error, done));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    done.textContent = "";
    const req = readForm(name, spec);
    // A PIN is typed for one signature and never kept: a dealer's PIN left in the field would
    // let the next slip go out under their name without them.
    document.getElementById(`${id}-pin`).value = "";
    if (spec.opener) document.getElementById(`${id}-opener-pin`).value = "";
    if (req.error) { error.textContent = req.error; return; }
    const key = JSON.stringify([req.slip, req.dealer]);
    if (!ask || ask.key !== key) ask = { key, id: requestId() };
    req.request_id = ask.id;
    button.disabled = true;
    try {
      const reply = await submit(name, req);
      ask = null; // answered: the next ask is a new one
      if (reply.ok) {
        done.textContent = reply.repeated
          ? `Journaled when first sent (its answer was lost; no second slip): ${slipWords(reply, name)}.`
          : `Journaled: ${slipWords(reply, name)}.`;
        for (const input of form.querySelectorAll("input:not([type=date])")) input.value = "";
        amountSaid.textContent = "";
        if (spec.inventory) showTotals(id);
      } else {
        error.textContent = reply.error || "refused";
      }
    } catch (err) {
      // No answer: the slip may or may not have been journaled. The same form sent again is the
      // same ask (the same request_id), so sending it again is safe.
      error.textContent = `no answer from the table (${err.message}): send it again as it is, ` +
        "the table makes no second slip for the same ask";
    } finally {
      button.disabled = disabled;
    }
  });
  // A <details> each: the procedures that apply now are open, the others one tap away (a phone).
  return el("details", { class: "panel proc", id: `${id}-panel`, "data-when": spec.when },
    el("summary", { id: `${id}-title` }, el("span", { class: "proc-title" }, spec.title),
      el("span", { class: "muted when", id: `${id}-when` }, "")), form);
}

// The drop form's gaming day: the table's (status table_day.gaming_day, by the table's clock and
// [gaming_day]), not the browser's date, until the supervisor types another.
export function tableDayDefault(day) {
  const input = document.getElementById("proc-drop-day");
  if (!input || input.dataset.typed === "yes" || !day || typeof day.gaming_day !== "string") return;
  if (/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(day.gaming_day) && input.value !== day.gaming_day) input.value = day.gaming_day;
}
