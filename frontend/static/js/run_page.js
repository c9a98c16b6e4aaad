// Entry point of the run page (/runs/<id>/) and of a shared run (/share/<token>/).
// Loads curves over REST, notes the cursor, then follows the websocket from that cursor.

import { Api, duration, esc, readConfig, readRules } from "./api.js";
import { CurveBoard } from "./curves.js";
import { StepClock } from "./eta.js";
import { NotesClient } from "./notes.js";
import { RolloutDetail } from "./rollout_detail.js";
import { RolloutList } from "./rollout_list.js";
import { RunActions } from "./run_actions.js";
import { SharePanel } from "./share.js";
import { initTheme } from "./theme.js";
import { RunSocket, showLiveState } from "./ws.js";

const LOG_LINES = 300;
const TERMINAL = new Set(["succeeded", "failed", "cancelled", "interrupted"]);

// A finished run's socket stays open (notes added later still arrive), but nothing runs: its mark says so.
// What the mark says once the run has ended: "finished" only for a run that did (issue 39: a cancelled run
// read "finished").
const ENDED_WORD = { succeeded: "finished", cancelled: "stopped", failed: "ended", interrupted: "interrupted" };
const FINISHED_TITLE = "The run has ended; the page still shows what is added to it (notes).";

class Progress {
  // `samplingLine`: the server's pattern of a trainer's "how far a sampling is" line (client rules).
  constructor(run, logLines = [], samplingLine = null) {
    this.run = run;
    this.startLine = logLines.filter((line) => !/^\[\w+\]$/.test(line)).at(-1) || ""; // not a bare "[running]"
    this.samplingLine = samplingLine ? new RegExp(samplingLine) : null;
    // The latest of those lines (a step's sampling, a validation's), shown until the step's metrics arrive;
    // on load, the log's last line when it is one (the step it counts has not reported since).
    this.sampling = this.isSampling(logLines.at(-1)) ? logLines.at(-1) : "";
    this.clock = new StepClock();
    this.socketState = "connecting";
    this.el = {
      state: document.querySelector("[data-run-state]"),
      step: document.querySelector("[data-run-step]"),
      bar: document.querySelector("[data-run-progress]"),
      etaBox: document.querySelector("[data-run-eta-box]"),
      etaLabel: document.querySelector("[data-run-eta-label]"),
      eta: document.querySelector("[data-run-eta]"),
      live: document.querySelector("[data-live-state]"),
      detail: document.querySelector("[data-run-detail]"),
      placement: document.querySelector("[data-run-placement]"),
      scoring: document.querySelector("[data-scoring-failed]"),
    };
    this.update({});
  }

  // The websocket's state: "live" reads "finished" once the run has ended.
  socket(state) {
    this.socketState = state;
    this.renderLive();
  }

  renderLive() {
    const finished = this.socketState === "live" && TERMINAL.has(this.run.state);
    const shown = finished ? ENDED_WORD[this.run.state] : this.socketState;
    if (this.el.live.textContent === shown) return; // render runs every step: write only a change
    showLiveState(this.el.live, finished ? "finished" : shown); // an ended run's mark: grey, whatever the word
    this.el.live.textContent = shown;
    this.el.live.title = finished ? FINISHED_TITLE : "";
  }

  // Seconds from its start to its end, for a finished run that started; else null.
  took() {
    const { started, finished } = this.run;
    if (!started || !finished) return null;
    return Math.max(0, (Date.parse(finished) - Date.parse(started)) / 1000);
  }

  update(fields) {
    Object.assign(this.run, fields);
    this.clock.started = this.run.started ? Date.parse(this.run.started) / 1000 : null;
    this.render();
  }

  // A metrics event: its step, time (epoch seconds) and values (the trainer's timing/step_s among them).
  step(step, time, values) {
    if (step > (this.run.last_step ?? -1)) this.run.last_step = step;
    this.sampling = ""; // the metrics of what it counted
    this.clock.seen(step, time, values["timing/step_s"]);
    this.render();
  }

  // Running, no training step reported yet (last_step 0: none, or the validation before training): the
  // minutes a model load or a cold start can take.
  starting() {
    return this.run.state === "running" && !this.run.last_step;
  }

  // A log line of the run: shown in the header while it starts (rendered only then: a line a step otherwise).
  logged(line) {
    this.startLine = line;
    if (this.isSampling(line)) this.sampling = line;
    if (this.starting() || this.isSampling(line)) this.render();
  }

  isSampling(line) {
    return !!(this.samplingLine && line && this.samplingLine.test(line));
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
    // A finished run shows how long it ran (none when it never started), a live one its ETA.
    const finished = TERMINAL.has(state);
    const took = finished ? this.took() : null;
    const eta = this.eta();
    if (this.el.etaLabel.textContent !== (finished ? "took" : "ETA")) this.el.etaLabel.textContent = finished ? "took" : "ETA";
    this.el.eta.textContent = finished ? (took === null ? "–" : duration(took)) : eta === null ? "–" : duration(eta);
    this.el.etaBox.hidden = finished && took === null;
    this.el.etaBox.title = finished && took !== null ? "From its start to its end" : "";
    this.renderScoring();
    this.renderLive();
    // A failure's error, or what a queued run waits for (free GPUs; else a worker: studio/runs/queueing.py),
    // or until its first step what a started run is doing (its latest log line: a model loading, a cold
    // start); where a started run runs.
    // or, later, how far the step's sampling is.
    const starting = this.starting() ? this.startLine : state === "running" ? this.sampling : "";
    const queued = state === "queued" ? this.run.waiting_for || this.run.queue || "" : "";
    this.el.detail.textContent = this.run.error || queued || starting;
    this.el.detail.classList.toggle("note", !this.run.error && !!(queued || starting)); // muted: not an error's red
    this.el.placement.textContent = this.run.placement || "";
    this.el.placement.hidden = !this.run.placement;
  }

  // "scoring failed": criteria that raised on (nearly) every rollout, as the studio tallied when the run ended.
  renderScoring() {
    const failed = this.run.scoring_failed || [];
    const text = ["scoring failed", ...failed.map((f) => `${f.criterion} ${f.failed}/${f.rollouts}`)].join(" · ");
    if (this.el.scoring.hidden === !failed.length && this.el.scoring.textContent === text) return;
    this.el.scoring.hidden = !failed.length;
    this.el.scoring.textContent = text;
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

// The run's actions for an editor (none on a share link): offered as the server's `actions` say, read
// again when its state changes or it saves a checkpoint (evaluate and resume need one).
function bindActions(api, runId, progress, canAct) {
  if (!canAct) return {};
  const show = () => actions.show(progress.run.actions);
  const actions = new RunActions(document, {
    api,
    runId,
    state: () => progress.run.state,
    onStopped: (run) => {
      progress.update({ state: run.state, cancel_requested: run.cancel_requested, actions: run.actions });
      show(); // asked once: no second Stop
    },
  });
  show();
  let timer = null;
  const reread = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        const run = await api.get(`/api/runs/${runId}/`);
        const { state, actions: offered, scoring_failed, started, finished, cancel_requested } = run;
        progress.update({ state, actions: offered, scoring_failed, started, finished, cancel_requested });
        show();
      } catch (err) {
        console.warn(`could not read the run's actions again: ${err.message}`);
      }
    }, 300);
  };
  return { show, reread };
}

async function main() {
  initTheme();
  const config = readConfig("run-config");
  const rules = readRules();
  const runId = config.run.id;
  const api = new Api({ shareToken: config.share_token });
  const progress = new Progress({ ...config.run }, config.log_lines || [], rules.sampling_line);
  const logs = new LogTail(document.querySelector("[data-log-tail]"), config.log_lines || []);
  const actions = bindActions(api, runId, progress, config.can_act);

  const board = new CurveBoard(document.querySelector("[data-curves]"), {
    api,
    sources: [{ runId, label: config.run.name }],
    panels: rules.panels,
    lineage: config.lineage || [],
    reserved: config.reserved_panels || [],
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

  const socket = new RunSocket({
    runId,
    cursor,
    shareToken: config.share_token,
    onState: (s) => progress.socket(s),
    onHello: (hello) => {
      progress.update(hello.run || {});
      actions.show?.();
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
        if (ev.data.restarted_from_step !== undefined) restarted(ev, { board, rollouts, progress });
        const state = ev.data.state;
        const at = new Date(ev.time * 1000).toISOString();
        progress.update({
          state,
          error: state === "failed" ? ev.data.detail : progress.run.error,
          waiting_for: state === "queued" ? ev.data.detail : "",
          placement: ev.data.placement ?? progress.run.placement,
          // until the run is read again: its start and end as this event saw them
          started: state === "queued" ? null : progress.run.started || (state === "running" ? at : null),
          finished: TERMINAL.has(state) ? progress.run.finished || at : null,
          scoring_failed: ev.data.scoring_failed ?? (TERMINAL.has(state) ? progress.run.scoring_failed : []),
        });
        actions.reread?.();
        const line = `[${ev.data.state}] ${ev.data.detail || ""}`.trim();
        logs.push(line);
        if (ev.data.detail) progress.logged(line);
      } else if (ev.kind === "log") {
        logs.push(ev.data.line);
        progress.logged(ev.data.line);
      } else if (ev.kind === "checkpoint") {
        logs.push(`checkpoint saved: ${ev.data.path}`);
        actions.reread?.(); // a checkpoint makes it one to evaluate (and, once ended, to resume)
      } else if (ev.kind === "warning") {
        showWarning(ev.data.message, ev.step);
      } else if (ev.kind === "notes") {
        notes.refresh();
      } // other kinds (prompt_stats: the prompts view's) are not this page's
    },
  });
  socket.connect();
  if (!config.share_token) followQueue(api, runId, progress);
  window.studioRunPage = { board, rollouts, rolloutDetail, notes, socket, progress, logs, actions }; // for the browser test and the console
  document.body.dataset.ready = "1";
}

// While the run is queued, what it waits behind (no worker, every place taken: `queue`) is read again
// every QUEUE_POLL_MS: nothing on its own stream says that a run ahead of it ended or a worker started.
const QUEUE_POLL_MS = 10000;

function followQueue(api, runId, progress) {
  const poll = async () => {
    if (progress.run.state === "queued") {
      try {
        const { state, queue, waiting_for } = await api.get(`/api/runs/${runId}/`);
        if (state === "queued" && progress.run.state === "queued") progress.update({ queue, waiting_for });
      } catch (err) {
        console.warn(`could not read what the queued run waits for: ${err.message}`);
      }
    } // an automatic restart queues a failed run again: the loop goes on, reading nothing meanwhile
    setTimeout(poll, QUEUE_POLL_MS);
  };
  setTimeout(poll, QUEUE_POLL_MS);
}

// The studio restarted the run from a checkpoint: what it reported after that step was removed and
// is reported again, so the curves and the rollout list are read again, and the restart is listed.
function restarted(ev, { board, rollouts, progress }) {
  progress.run.last_step = ev.data.restarted_from_step;
  board.reload().catch((e) => e.name !== "AbortError" && console.error(e));
  rollouts.reload();
  const box = document.querySelector("[data-run-restarts]");
  const item = document.createElement("li");
  item.textContent = `${new Date(ev.time * 1000).toLocaleString()} · ${ev.data.detail}`;
  box.querySelector("[data-restart-list]").append(item);
  box.querySelector("[data-restart-count]").textContent = String(ev.data.restarts);
  box.hidden = false;
}

// The trainer's warnings (a criterion failing on most rollouts, prompts cut), a line each under the header:
// every one of the latest step that had any, as the run keeps them (studio.runs.reports.banner); a warning
// of a later step replaces them.
function showWarning(message, step) {
  const box = document.querySelector("[data-run-warning]");
  const at = step === null || step === undefined ? "" : String(step);
  const text = message.split(/\s+/).filter(Boolean).join(" ");
  if (box.dataset.warningStep !== at) box.replaceChildren();
  box.dataset.warningStep = at;
  const shown = [...box.querySelectorAll("[data-run-warning-text]")].map((el) => el.textContent);
  if (!shown.includes(text)) {
    const line = document.createElement("p");
    const span = document.createElement("span");
    span.dataset.runWarningText = "";
    span.textContent = text;
    line.append("⚠ ", span);
    box.append(line);
  }
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
