// The shift's plot (inline SVG, drawn here; no library): the cumulative settled win
// round by round against the expected win given the decisions, inside its 95 % band
// (mean ± 1.96 sd from the exact variance, table/rules/expectation.py). A settled win
// outside the band is what COMAR 36.05.03.25 B(2) asks to investigate: such points are
// crosses, the others dots, so it is never told by colour alone.

const NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

/** Cents as dollars for an axis: 123456 -> "$1,234", -5000 -> "−$50". */
function axisMoney(cents) {
  const d = Math.round(cents / 100);
  const text = `$${Math.abs(d).toLocaleString("en-US")}`;
  return d < 0 ? `−${text}` : text;
}

/** Round numbers for an axis between lo and hi: about four steps of 1, 2 or 5 × 10^k. */
function ticks(lo, hi) {
  const span = hi - lo || 1;
  const raw = span / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(v);
  return out;
}

const path = (pts) => pts.map(([x, y], i) => `${i ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`).join(" ");

/**
 * The <svg> plot of `series` ([{round, settled_cum_cents, expected_cum_cents, band_lo_cents,
 * band_hi_cents}], one point a settled round, in order). `money(cents)` says an amount in
 * words for the plot's description.
 */
export function shiftPlot(series, money, { width = 560, height = 260 } = {}) {
  const pts = Array.isArray(series) ? series : [];
  const last = pts[pts.length - 1];
  const outside = pts.filter((p) => p.settled_cum_cents < p.band_lo_cents || p.settled_cum_cents > p.band_hi_cents);
  const root = svg("svg", { id: "report-plot", class: "chart shift-plot", viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-labelledby": "report-plot-title report-plot-desc", "data-rounds": pts.length,
    "data-outside": outside.length });
  root.append(svg("title", { id: "report-plot-title" }, "Cumulative settled win against its expectation"));
  root.append(svg("desc", { id: "report-plot-desc" }, last
    ? `After ${pts.length} round${pts.length === 1 ? "" : "s"} the settled win is ${money(last.settled_cum_cents)}; expected given the decisions `
      + `${money(last.expected_cum_cents)}, 95 % band ${money(last.band_lo_cents)} to ${money(last.band_hi_cents)}; `
      + (outside.length ? `${outside.length} round${outside.length === 1 ? " ends" : "s end"} outside the band.` : "it stays inside the band.")
    : "No settled round in this period yet."));
  const left = 64, right = 12, top = 12, bottom = 34;
  const w = width - left - right, h = height - top - bottom;
  if (!pts.length) {
    root.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "no settled round in this period yet"));
    return root;
  }
  const values = pts.flatMap((p) => [p.settled_cum_cents, p.expected_cum_cents, p.band_lo_cents, p.band_hi_cents]);
  let lo = Math.min(0, ...values), hi = Math.max(0, ...values);
  if (hi - lo < 100) { lo -= 50; hi += 50; }
  const pad = (hi - lo) * 0.05;
  lo -= pad; hi += pad;
  const n = pts.length;
  const x = (i) => left + (n === 1 ? w / 2 : (i / (n - 1)) * w);
  const y = (v) => top + h - ((v - lo) / (hi - lo)) * h;
  for (const v of ticks(lo, hi)) {
    root.append(svg("line", { class: v === 0 ? "zero" : "grid", x1: left, y1: y(v), x2: left + w, y2: y(v) }));
    root.append(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, axisMoney(v)));
  }
  const upper = pts.map((p, i) => [x(i), y(p.band_hi_cents)]);
  const lower = pts.map((p, i) => [x(i), y(p.band_lo_cents)]).reverse();
  const band = n === 1
    ? `M${x(0) - 4},${y(pts[0].band_hi_cents)} L${x(0) + 4},${y(pts[0].band_hi_cents)} L${x(0) + 4},${y(pts[0].band_lo_cents)} L${x(0) - 4},${y(pts[0].band_lo_cents)} Z`
    : `${path([...upper, ...lower])} Z`;
  root.append(svg("path", { class: "band", d: band, "data-series": "band" }));
  root.append(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: top + h }));
  root.append(svg("line", { class: "axis", x1: left, y1: top + h, x2: left + w, y2: top + h }));
  root.append(svg("path", { class: "expected", d: path(pts.map((p, i) => [x(i), y(p.expected_cum_cents)])),
    "data-series": "expected" }));
  root.append(svg("path", { class: "settled", d: path(pts.map((p, i) => [x(i), y(p.settled_cum_cents)])),
    "data-series": "settled" }));
  const every = Math.max(1, Math.ceil(n / 80));
  pts.forEach((p, i) => {
    const out = p.settled_cum_cents < p.band_lo_cents || p.settled_cum_cents > p.band_hi_cents;
    if (!out && i % every !== 0 && i !== n - 1) return;
    const cx = x(i), cy = y(p.settled_cum_cents);
    root.append(out
      ? svg("path", { class: "point-outside", d: `M${cx - 4},${cy - 4}L${cx + 4},${cy + 4}M${cx - 4},${cy + 4}L${cx + 4},${cy - 4}`,
        "data-round": p.round })
      : svg("circle", { class: "point-inside", cx, cy, r: 2.5, "data-round": p.round }));
  });
  root.append(svg("text", { x: left, y: height - 8 }, `round ${pts[0].round}`));
  root.append(svg("text", { x: left + w, y: height - 8, "text-anchor": "end" }, `round ${last.round}`));
  root.append(svg("text", { x: left + w / 2, y: height - 8, "text-anchor": "middle" }, `${n} settled round${n === 1 ? "" : "s"}`));
  return root;
}
