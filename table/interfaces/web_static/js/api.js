// The table API as the screens use it: sign-in over HTTP, then one WebSocket for
// requests, replies and pushed events (docs/console.md). The session is the HttpOnly
// cookie the sign-in sets: no token is kept where page scripts can read it.

const API = "/api/v1";

/** Sign in with a person id and PIN; resolves to the session ({person, role, ...}) or throws an Error with the table's words. */
export async function signIn(person, pin) {
  let resp;
  try {
    resp = await fetch(`${API}/session`, {
      method: "POST", credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ person, pin }),
    });
  } catch {
    throw new Error("the table does not answer: sign in again in a moment"); // not the browser's "Failed to fetch"
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok || !body.ok) throw new Error(body.error || `sign-in failed (${resp.status})`);
  delete body.token; // the cookie carries the session; the token is not kept in the page
  return body;
}

/** The signed-in session, or null. */
export async function whoami() {
  const resp = await fetch(`${API}/session`, { credentials: "same-origin", cache: "no-store" });
  if (resp.status === 401) return null;
  const body = await resp.json().catch(() => null);
  return body && body.ok ? body : null;
}

/** True when the table answers and does not know this session (401: a restart ends every
 *  session); false when it knows it; rejects when the table does not answer at all. */
export async function sessionGone() {
  const resp = await fetch(`${API}/session`, { credentials: "same-origin", cache: "no-store" });
  return resp.status === 401;
}

/** Sign out; throws an Error saying why when the table did not (no answer, or a refusal). */
export async function signOut() {
  let resp;
  try {
    resp = await fetch(`${API}/session`, { method: "DELETE", credentials: "same-origin",
      headers: { "content-type": "application/json" } });
  } catch {
    throw new Error("the table does not answer");
  }
  if (!resp.ok) {
    const body = await resp.json().catch(() => ({}));
    throw new Error(body.error || `the table answered ${resp.status}`);
  }
}

/**
 * One WebSocket to the table: request() sends a request and resolves to its one reply;
 * onEvent/onStatus get what the subscription pushes. Reconnects with the last seq, so
 * no event is lost or repeated across a dropped connection.
 */
export class TableConnection {
  constructor({ onEvent, onStatus, onState, backfill = 300 }) {
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.onState = onState || (() => {});
    this.backfill = backfill;
    this.lastSeq = null;
    this.pending = new Map();
    this.nextId = 1;
    this.ws = null;
    this.closed = false;
    this.retryMs = 500;
  }

  start() {
    this._open();
    return this;
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
  }

  _open() {
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${API}/ws`;
    const ws = new WebSocket(url);
    this.ws = ws;
    this.onState("connecting");
    ws.onopen = () => this._subscribe().catch((err) => this.onState("error", String(err.message || err)));
    ws.onmessage = (msg) => this._message(msg.data);
    ws.onclose = (ev) => {
      for (const [, p] of this.pending) p.reject(new Error("the connection to the table closed"));
      this.pending.clear();
      if (this.closed) return;
      if (ev.code === 4401 || ev.code === 1008) { this.onState("signed_out"); return; }
      this.onState("offline");
      setTimeout(() => this._open(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 2000); // a restarted table is seen within 2 s
    };
  }

  async _subscribe() {
    let from = this.lastSeq;
    if (from === null) { // first connection: the recent past (the round in progress), then live
      const page = await this.request({ action: "events", after: 0, limit: 1 });
      if (!page.ok && page.code === "busy") return this._starting();
      from = Math.max(0, (page.head_seq || 0) - this.backfill);
    }
    const reply = await this.request({ action: "subscribe", resume_from: from, status: true });
    if (!reply.ok && reply.code === "busy") return this._starting();
    if (!reply.ok && reply.code === "bad_request" && /without a journal/.test(reply.error || "")) {
      // A table that keeps no journal (one restarted after its disk was lost) has no event stream:
      // the screen follows its status alone, which carries the alarms and what it waits for.
      this.retryMs = 500;
      this.onState("live", "status only: this table keeps no journal, so it has no event stream");
      const status = await this.request({ action: "status" });
      if (status.ok) this.onStatus(status);
      return;
    }
    if (!reply.ok) throw new Error(reply.error);
    this.retryMs = 500;
    this.onState("live");
    const status = await this.request({ action: "status" });
    if (status.ok) this.onStatus(status);
  }

  _starting() {
    // The table answered while it starts (its devices' drivers not up yet): the screen says so
    // and asks again on this connection, backing off as a reconnect does, until it is live.
    this.onState("connecting", "the table is starting");
    const ws = this.ws;
    setTimeout(() => {
      if (this.closed || this.ws !== ws || ws.readyState !== WebSocket.OPEN) return; // a reconnect asks anew
      this._subscribe().catch((err) => this.onState("error", String(err.message || err)));
    }, this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, 2000);
  }

  _message(text) {
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    if (msg === null || typeof msg !== "object") return;
    if (msg.id !== undefined && msg.id !== null && this.pending.has(msg.id)) {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      p.resolve(msg);
      return;
    }
    if (msg.type === "status" && msg.status) { this.onStatus(msg.status); return; }
    if (msg.type === "subscription_ended") { this.lastSeq = msg.last_seq; this.ws.close(); return; }
    if (msg.schema === "threecard.events/1" && Number.isInteger(msg.seq)) {
      if (this.lastSeq !== null && msg.seq <= this.lastSeq) return; // already applied
      this.lastSeq = msg.seq;
      this.onEvent(msg);
    }
  }

  /** Send one request object; resolves to its reply (never rejects for a refusal: read reply.ok). */
  request(req) {
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new Error("not connected to the table"));
        return;
      }
      const id = `p${this.nextId++}`;
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ ...req, id }));
    });
  }
}
