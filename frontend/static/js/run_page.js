// Entry point of the run page (/runs/<id>/) and of a shared run (/share/<token>/).
// Loads curves over REST, notes the cursor, then follows the websocket from that cursor.

import { Api, duration, esc, readConfig, readRules } from "./api.js";
import { CurveBoard } from "./curves.js";
import { StepClock } from "./eta.js";
import { NotesClient } from "./notes.js";
import { RolloutDetail } from "./rollout_detail.js";
import { RolloutList } from "./rollout_list.js";
import { SharePanel } from "./share.js";
import { initTheme } from "./theme.js";
import { RunSocket, showLiveState } from "./ws.js";

const LOG_LINES = 300;
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

class Progress {
  constructor(run) {
    this.run = run;
    this.clock = new StepClock();
    this.el = {
      state: document.querySelector("[data-run-state]"),
      step: document.querySelector("[data-run-step]"),
      bar: document.querySelector("[data-run-progress]"),
      eta: document.querySelector("[data-run-eta]"),
      live: document.querySelector("[data-live-state]"),
      detail: document.querySelector("[data-run-detail]"),
    };
    this.update({});
  }

  update(fields) {
    Object.assign(this.run, fields);
    this.clock.started = this.run.started ? Date.parse(this.run.started) / 1000 : null;
    this.render();
  }

  // A metrics event: its step, time (epoch seconds) and values (the trainer's timing/step_s among them).
  step(step, time, values) {
    if (step > (this.run.last_step ?? -1)) this.run.last_step = step;
    this.clock.seen(step, time, values["timing/step_s"]);
    this.render();
  }

  eta() {
    const { last_step: step, total_steps: total } = this.run;
    if (TERMINAL.has(this.run.state) || !total || step === null || step === undefined) return null;
    return this.clock.eta(step, total);
  }

  render() {
    const { state, last_step: step, total_steps: total } = this.run;
    this.el.state.textContent = state;
    this.el.state.className = `badge state-${state}`;
    this.el.step.textContent = `${step ?? 0}${total ? ` / ${total}` : ""}`;
    const pct = total ? Math.min(100, (100 * (step ?? 0)) / total) : 0;
    this.el.bar.style.transform = `scaleX(${(state === "succeeded" ? 100 : pct) / 100})`;
    const eta = this.eta();
    this.el.eta.textContent = TERMINAL.has(state) ? "done" : eta === null ? "–" : duration(eta);
    if (this.run.error) this.el.detail.textContent = this.run.error;
  }
}

// The run's last LOG_LINES log lines. A line is appended as a text node in the next frame, not
// the whole tail rewritten: a fast run logs a line a step.
class LogTail {
  constructor(pre, lines) {
    this.pre = pre;
    this.waiting = [];
    this.frameAsked = false;
    this.count = 0;
    this.pre.textContent = "No log lines yet.";
    this.append(lines.slice(-LOG_LINES));
  }

  push(line) {
    this.waiting.push(line);
    if (this.frameAsked) return;
    this.frameAsked = true;
    requestAnimationFrame(() => {
      this.frameAsked = false;
      const lines = this.waiting;
      this.waiting = [];
      this.append(lines);
    });
  }

  append(lines) {
    if (!lines.length) return;
    const pre = this.pre;
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    if (this.count === 0) pre.textContent = "";
    for (const line of lines) pre.append(document.createTextNode(`${line}\n`));
    this.count += lines.length;
    for (; this.count > LOG_LINES; this.count--) pre.firstChild.remove();
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }
}

function bindCurveControls(board) {
  const controls = document.querySelector("[data-curve-controls]");
  const smooth = controls.querySelector("[name=smoothing]");
  const smoothLabel = controls.querySelector("[data-smoothing-value]");
  smooth.addEventListener("input", () => {
    smoothLabel.textContent = Number(smooth.value).toFixed(2);
    board.setSmoothing(Number(smooth.value));
  });
  controls.querySelector("[name=log]").addEventListener("change", (ev) => board.setLog(ev.target.checked));
  for (const radio of controls.querySelectorAll("[name=xaxis]")) {
    radio.addEventListener("change", () => radio.checked && board.setXMode(radio.value));
  }
}

function bindCancel(api, runId, progress) {
  const button = document.querySelector("[data-cancel-run]");
  if (!button) return;
  const sync = () => {
    button.hidden = TERMINAL.has(progress.run.state);
  };
  sync();
  button.addEventListener("click", async () => {
    if (!window.confirm("Stop this run? It saves a checkpoint and ends.")) return;
    button.disabled = true;
    await api.post(`/api/runs/${runId}/cancel/`, {});
    button.textContent = "Stopping…";
  });
  return sync;
}

async function main() {
  initTheme();
  const config = readConfig("run-config");
  const rules = readRules();
  const runId = config.run.id;
  const api = new Api({ shareToken: config.share_token });
  const progress = new Progress({ ...config.run });
  const logs = new LogTail(document.querySelector("[data-log-tail]"), config.log_lines || []);
  const syncCancel = bindCancel(api, runId, progress);

  const board = new CurveBoard(document.querySelector("[data-curves]"), {
    api,
    sources: [{ runId, label: config.run.name }],
    panels: rules.panels,
  });
  bindCurveControls(board);

  // The inspector: the rollout list, and beside it the detail its rows open in.
  const inspectorRoot = document.querySelector("[data-inspector]");
  let rollouts = null;
  const notes = new NotesClient(document.querySelector("[data-notes-panel]"), {
    api,
    runId,
    canNote: config.can_note,
    onOpenRollout: (rid) => {
      inspectorRoot.scrollIntoView({ behavior: "smooth", block: "start" });
      rolloutDetail.open(rid);
    },
    onChange: () => rollouts?.onNotesChanged(),
  });
  const rolloutDetail = new RolloutDetail(inspectorRoot, {
    api,
    runId,
    rules,
    notes,
    canNote: config.can_note,
    onClose: () => rollouts.focusSelected(),
  });
  rollouts = new RolloutList(inspectorRoot, { api, runId, rules, criteria: config.criteria, notes, detail: rolloutDetail });
  rollouts.prefill(new URLSearchParams(window.location.search));
  if (config.can_share) new SharePanel(document.querySelector("[data-share-panel]"), { api, runId }).load();

  const [cursor] = await Promise.all([board.load(), rollouts.reload(), notes.load()]);
  progress.clock.seed(board.recentPoints("timing/step_s"));
  progress.render();

  const liveState = document.querySelector("[data-live-state]");
  const socket = new RunSocket({
    runId,
    cursor,
    shareToken: config.share_token,
    onState: (s) => showLiveState(liveState, s),
    onHello: (hello) => {
      progress.update(hello.run || {});
      syncCancel?.();
      notes.refresh(); // note hints are not replayed: catch up on any sent while not connected
    },
    onClosed: (code) => {
      if (code === 4403 || code === 4404) {
        document.body.classList.add("access-lost");
        document.querySelector("[data-access-lost]").hidden = false;
      }
    },
    onEvent: (ev) => {
      if (ev.kind === "metrics") {
        board.push(ev.step, ev.time, ev.data.values);
        if (ev.step !== null) progress.step(ev.step, ev.time, ev.data.values);
      } else if (ev.kind === "rollouts") {
        rollouts.onLive(ev.data.items);
      } else if (ev.kind === "status") {
        progress.update({ state: ev.data.state, error: ev.data.state === "failed" ? ev.data.detail : progress.run.error });
        syncCancel?.();
        logs.push(`[${ev.data.state}] ${ev.data.detail || ""}`.trim());
      } else if (ev.kind === "log") {
        logs.push(ev.data.line);
      } else if (ev.kind === "checkpoint") {
        logs.push(`checkpoint saved: ${ev.data.path}`);
      } else if (ev.kind === "warning") {
        showWarning(ev.data.message);
      } else if (ev.kind === "notes") {
        notes.refresh();
      } // other kinds (prompt_stats: the prompts view's) are not this page's
    },
  });
  socket.connect();
  window.studioRunPage = { board, rollouts, rolloutDetail, notes, socket, progress, logs }; // for the browser test and the console
  document.body.dataset.ready = "1";
}

// The trainer's latest warning (a criterion failing on most rollouts, prompts cut): a banner under the header.
function showWarning(message) {
  const box = document.querySelector("[data-run-warning]");
  box.querySelector("[data-run-warning-text]").textContent = message;
  box.hidden = false;
}

main().catch((err) => {
  console.error(err);
  const box = document.querySelector("[data-page-error]");
  if (box) {
    box.hidden = false;
    box.innerHTML = `Could not load the run: ${esc(err.message)}`;
  }
});
