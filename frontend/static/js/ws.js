// Websocket client for /ws/runs/<id>/. Keeps the cursor (latest seq seen) so a reconnect
// asks for "everything after" it and nothing is lost or shown twice.

export class RunSocket {
  constructor({ runId, cursor = 0, shareToken = null, onHello, onEvent, onState, onClosed }) {
    this.runId = runId;
    this.cursor = cursor;
    this.shareToken = shareToken;
    this.onHello = onHello || (() => {});
    this.onEvent = onEvent || (() => {});
    this.onState = onState || (() => {});
    this.onClosed = onClosed || (() => {});
    this.retry = 0;
    this.stopped = false;
    this.socket = null;
  }

  url() {
    const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    const params = new URLSearchParams({ after: String(this.cursor) });
    if (this.shareToken) params.set("share", this.shareToken);
    return `${proto}//${window.location.host}/ws/runs/${this.runId}/?${params}`;
  }

  connect() {
    this.onState("connecting");
    const socket = new WebSocket(this.url());
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.retry = 0;
      this.onState("live");
    });
    socket.addEventListener("message", (msg) => this.handle(JSON.parse(msg.data)));
    socket.addEventListener("close", (ev) => {
      if (this.socket !== socket) return;
      // 4403/4404: not allowed (revoked share link, removed from the team): do not retry.
      // Any other close (4503: the server lost its channel layer, Redis) reconnects from the cursor.
      if (ev.code === 4403 || ev.code === 4404 || this.stopped) {
        this.onState("closed");
        this.onClosed(ev.code);
        return;
      }
      this.onState("reconnecting");
      const delay = Math.min(15000, 500 * 2 ** this.retry++);
      setTimeout(() => this.connect(), delay);
    });
  }

  handle(message) {
    const batch = Array.isArray(message) ? message : message.events || [message];
    for (const item of batch) {
      if (item.kind === "hello") {
        this.onHello(item);
        continue;
      }
      if (typeof item.seq === "number") {
        if (item.seq <= this.cursor) continue; // already shown (REST load or earlier replay)
        this.cursor = item.seq;
      }
      this.onEvent(item);
    }
  }

  close() {
    this.stopped = true;
    if (this.socket) this.socket.close();
  }
}

// The page's "connecting / live / reconnecting / closed" mark (its `.live-<state>` colours); the run
// page shows "finished" for a live socket of a run that has ended.
export function showLiveState(el, state) {
  el.textContent = state;
  el.className = `live live-${state}`;
}
