// The shuffle check as a chart (inline SVG, drawn here; no library): per deck, the
// chi-square statistic after each of its rounds, and the 95 % line the test fails above.
// Rounds without enough cards for a verdict are shaded and say so; failing points are
// crosses, passing ones dots, so the verdict is never told by colour alone.

const NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

const VERDICT_WORDS = { pass: "passes", fail: "FAILS", insufficient: "not enough rounds yet for a verdict" };

/** An <svg> chart of one deck's curve ({rounds, points: [{round, statistic, critical_value, verdict}], verdict, p_value}). */
export function shuffleChart(deckId, curve, { width = 560, height = 240 } = {}) {
  const pts = curve.points || [];
  const id = `chart-${String(deckId).replace(/[^A-Za-z0-9_-]/g, "")}`;
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-labelledby": `${id}-title ${id}-desc`, "data-deck": deckId, "data-verdict": curve.verdict });
  const p = curve.p_value === null || curve.p_value === undefined ? "" : `, p = ${Number(curve.p_value).toPrecision(3)}`;
  root.append(svg("title", { id: `${id}-title` }, `Shuffle check, deck ${deckId}`));
  root.append(svg("desc", { id: `${id}-desc` }, `Chi-square statistic over ${curve.rounds} round${curve.rounds === 1 ? "" : "s"} against the 95 % `
    + `line: the shuffle ${VERDICT_WORDS[curve.verdict] || curve.verdict}${p}.`));
  const left = 56, right = 12, top = 14, bottom = 34;
  const w = width - left - right, h = height - top - bottom;
  if (!pts.length) {
    root.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "no finished round dealt from this deck yet"));
    return root;
  }
  const maxRound = Math.max(...pts.map((q) => q.round), 1);
  const crit = Math.max(...pts.map((q) => q.critical_value));
  const top_ = Math.max(crit * 1.4, Math.min(Math.max(...pts.map((q) => q.statistic)), crit * 3));
  const x = (r) => left + (maxRound === 1 ? w / 2 : ((r - 1) / (maxRound - 1)) * w);
  const y = (v) => top + h - (Math.min(v, top_) / top_) * h;
  // rounds with too few cards per cell for a verdict
  const insufficient = pts.filter((q) => q.verdict === "insufficient");
  if (insufficient.length) {
    const last = insufficient[insufficient.length - 1].round;
    root.append(svg("rect", { class: "insufficient", x: left, y: top, width: Math.max(2, x(last) - left), height: h }));
    root.append(svg("text", { x: left + 4, y: top + 14 }, "too few rounds for a verdict"));
  }
  root.append(svg("line", { class: "axis", x1: left, y1: top + h, x2: left + w, y2: top + h }));
  root.append(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: top + h }));
  for (const v of [0, top_ / 2, top_]) {
    root.append(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, Math.round(v)));
  }
  root.append(svg("text", { x: left, y: height - 8 }, "round 1"));
  root.append(svg("text", { x: left + w, y: height - 8, "text-anchor": "end" }, `round ${maxRound}`));
  root.append(svg("text", { x: left + w / 2, y: height - 8, "text-anchor": "middle" }, "rounds of this deck"));
  root.append(svg("text", { x: 12, y: top + h / 2, transform: `rotate(-90 12 ${top + h / 2})`, "text-anchor": "middle" },
    "chi-square"));
  const limit = pts.map((q, i) => `${i ? "L" : "M"}${x(q.round).toFixed(1)},${y(q.critical_value).toFixed(1)}`).join(" ");
  root.append(svg("path", { class: "limit", d: limit, "data-series": "critical" }));
  root.append(svg("text", { x: left + w - 4, y: y(crit) - 6, "text-anchor": "end" }, "95 % line: fails above"));
  const line = pts.map((q, i) => `${i ? "L" : "M"}${x(q.round).toFixed(1)},${y(q.statistic).toFixed(1)}`).join(" ");
  root.append(svg("path", { class: "curve", d: line, "data-series": "statistic" }));
  const lastPts = pts.length > 60 ? pts.filter((_, i) => i % Math.ceil(pts.length / 60) === 0 || i === pts.length - 1) : pts;
  for (const q of lastPts) {
    const cx = x(q.round), cy = y(q.statistic);
    if (q.verdict === "fail") {
      root.append(svg("path", { class: "point-fail", d: `M${cx - 4},${cy - 4}L${cx + 4},${cy + 4}M${cx - 4},${cy + 4}L${cx + 4},${cy - 4}`,
        stroke: "#c0001a", "stroke-width": 2 }));
    } else {
      root.append(svg("circle", { class: `point-${q.verdict}`, cx, cy, r: 3 }));
    }
    if (q.statistic > top_) root.append(svg("text", { x: cx, y: top + 10, "text-anchor": "middle" }, "▲"));
  }
  return root;
}

export { VERDICT_WORDS };
