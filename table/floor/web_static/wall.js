"use strict";
// The pit's read-only wall page (/pit?pit=NAME): the floor's grid of one pit, every 2 s, no sign-in.
const pit = new URLSearchParams(location.search).get("pit") || "";
// every 2 s an ask; an answer older than one already drawn (a slow request under load) is dropped
let asked = 0, drawn = 0;
async function loadWall() {
  const ask = ++asked;
  let r;
  try {
    r = await fetch("/api/v1/floor/wall?pit=" + encodeURIComponent(pit), {credentials: "omit"});
  } catch (e) {
    if (ask < drawn) return;
    document.getElementById("wall-error").textContent = "the floor does not answer; trying again";
    return;
  }
  const body = await r.json().catch(() => null);
  if (ask < drawn) return;
  drawn = ask;
  if (r.status !== 200 || !body) {
    document.getElementById("wall-error").textContent = (body && body.error) || ("HTTP " + r.status);
    return;
  }
  document.getElementById("wall-error").textContent = "";
  const c = body.counts;
  document.getElementById("pit-counts").textContent = c.tables + " tables: " + c.online + " online, " + c.offline +
    " offline, " + c.no_news + " no news, " + c.alarmed + " with alarms · " + (body.at || "");
  document.getElementById("grid").replaceChildren(...body.tables.map((t) => tile(t, null)));
}
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("wall-h").textContent = "Pit " + pit;
  document.title = "Pit " + pit;
  loadWall();
  setInterval(loadWall, 2000);
});
