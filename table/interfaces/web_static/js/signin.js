// Sign-in: id and PIN to the table; then the screen for the person's role.

import { signIn, whoami } from "./api.js";

const SCREENS = { dealer: "/dealer.html", supervisor: "/supervisor.html", auditor: "/supervisor.html" };

function screenFor(role) {
  const next = new URLSearchParams(location.search).get("next");
  // Only a page of this site: never an address given in the link (an open redirect).
  if (next && /^\/[a-z]+\.html$/.test(next)) return next;
  return SCREENS[role] || "/dealer.html";
}

const form = document.getElementById("sign-in");
const error = document.getElementById("sign-in-error");
let attempts = 0; // sign-ins sent from this page: a slower "who is signed in" answer loses to them
form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  attempts++;
  error.textContent = "";
  const person = document.getElementById("person").value.trim();
  const pinBox = document.getElementById("pin");
  const pin = pinBox.value;
  pinBox.value = "";
  try {
    const session = await signIn(person, pin);
    location.replace(screenFor(session.role));
  } catch (err) {
    error.textContent = err.message;
    pinBox.focus();
  }
});

document.getElementById("sign-in-button").disabled = false;  // listening now (index.html says why it waited)

const asked = attempts;
whoami().then((me) => {
  if (attempts !== asked) return; // the person signed in (or was refused) meanwhile: that is newer
  if (me && !new URLSearchParams(location.search).has("again")) {
    error.textContent = "";
    const p = document.createElement("p");
    p.textContent = `Signed in as ${me.person} (${me.role}). `;
    const a = document.createElement("a");
    a.href = screenFor(me.role);
    a.textContent = "Go to your screen";
    p.append(a);
    form.before(p);
  }
});
if (new URLSearchParams(location.search).has("again")) {
  // Sent here by a screen whose session the table no longer knows (a restart ends every session).
  error.textContent = "The table restarted or your session ended: sign in again.";
}
document.getElementById("person").focus();
