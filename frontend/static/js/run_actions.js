// A run's actions (resume, evaluate its checkpoint, clone, stop) on the run page and in the runs
// tables, through the run API; the answer is written beside the buttons: a link to the new run, or
// the API's reason for a refusal. Which actions a run offers is the server's rule (Run.action_refusals:
// `run.actions` in the page's config, the websocket hello and the API); this module only shows them.

import { Api } from "./api.js";

// A queued run has not started: it is cancelled at once, and there is nothing to save.
const CONFIRM_CANCEL_QUEUED = "Cancel this queued run? It has not started, so it is cancelled at once (no checkpoint).";
// A running run's stop, said plainly: within seconds (between two sampled tokens), with or without a checkpoint.
export const STOP_CHOICES = [
  ["save", "Stop and save a checkpoint"],
  ["now", "Stop now (no checkpoint)"],
  ["keep", "Keep running"],
];
const STOP_QUESTION =
  "Stop this run? It stops within seconds, dropping the step it is in: with a checkpoint of the last whole step, " +
  "or now without one. (A run over several processes stops at the end of its step.)";

// What each action answers once it worked: `made` is the API's reply (the new run, or the stopped one).
const DONE = {
  resume: (made) => [`Resumed as run #${made.id}: `, made],
  evaluate: (made) => [`Evaluation queued as run #${made.id}: `, made],
  clone: (made) => [`Cloned as run #${made.id}: `, made],
  rerun: (made) => [
    `Running again exactly as run #${made.id}: `,
    made,
    (made.differences_now || []).length ? `. Differs now: ${made.differences_now.join("; ")}` : ". Nothing differs that the studio can see now.",
  ],
  cancel: (made, body) => {
    if (made.state === "cancelled") return ["Cancelled before it started."];
    return body && body.checkpoint === false
      ? ["Stopping now, without a checkpoint: the run ends within seconds."]
      : ["Stopping: the run saves the last whole step's checkpoint and ends within seconds."];
  },
};

// Ask how to stop a run in `state`; resolves to the body of the stop ({checkpoint}) or null (not stopped).
export function askStop(doc, state) {
  if (state === "queued") return Promise.resolve(window.confirm(CONFIRM_CANCEL_QUEUED) ? {} : null);
  return new Promise((resolve) => {
    const dialog = doc.createElement("dialog");
    dialog.className = "stop-dialog";
    dialog.dataset.stopDialog = "";
    const form = doc.createElement("form");
    form.method = "dialog"; // a button's value becomes the dialog's returnValue
    const question = doc.createElement("p");
    question.textContent = STOP_QUESTION;
    const buttons = doc.createElement("div");
    buttons.className = "actions";
    for (const [value, label] of STOP_CHOICES) {
      const button = doc.createElement("button");
      button.value = value;
      button.textContent = label;
      button.dataset.stopChoice = value;
      if (value !== "keep") button.className = "danger";
      buttons.append(button);
    }
    form.append(question, buttons);
    dialog.append(form);
    dialog.addEventListener("close", () => {
      const choice = dialog.returnValue;
      dialog.remove();
      resolve(choice === "save" ? { checkpoint: true } : choice === "now" ? { checkpoint: false } : null);
    });
    doc.body.append(dialog);
    dialog.showModal();
    buttons.querySelector("[data-stop-choice=keep]").focus(); // Enter alone stops nothing
  });
}

// The server's reason for a refusal, in its words: {detail} (409, 403), or {field: message} (a clone's
// settings refused), else the error's own text.
export function refusalText(err) {
  const data = err && err.data;
  if (data && typeof data === "object") {
    if (typeof data.detail === "string") return data.detail;
    const fields = Object.entries(data).map(([field, why]) => `${field}: ${Array.isArray(why) ? why.join(" ") : why}`);
    if (fields.length) return fields.join("; ");
  }
  return err && err.message ? err.message : String(err);
}

// POST the action; returns the API's reply (the new run, or for cancel the run itself).
export function postAction(api, runId, action, body = {}) {
  return api.post(`/api/runs/${runId}/${action}/`, body);
}

// Write an action's outcome into `box`: words, and a link to the run it made.
export function showAnswer(box, action, outcome, body = {}) {
  box.textContent = "";
  box.classList.toggle("error", !outcome.ok);
  box.classList.toggle("ok", outcome.ok);
  box.hidden = false;
  if (!outcome.ok) {
    box.textContent = outcome.reason;
    return;
  }
  for (const part of DONE[action](outcome.run, body)) {
    if (typeof part === "string") {
      box.append(part);
      continue;
    }
    const link = document.createElement("a");
    link.href = `/runs/${part.id}/`;
    link.textContent = part.name || `run #${part.id}`;
    link.dataset.newRun = String(part.id);
    box.append(link);
  }
}

// Run `action` on `runId` and say how it went in `box`; resolves to {ok, run | reason}.
export async function act(api, runId, action, box, body = {}) {
  let outcome;
  try {
    outcome = { ok: true, run: await postAction(api, runId, action, body) };
  } catch (err) {
    outcome = { ok: false, reason: refusalText(err) };
  }
  showAnswer(box, action, outcome, body);
  return outcome;
}

// The run page's buttons ([data-run-action=<name>]) and the answer beside them ([data-action-answer]).
export class RunActions {
  constructor(doc, { api, runId, state = () => "running", onStopped = () => {} }) {
    this.doc = doc;
    this.api = api;
    this.runId = runId;
    this.state = state; // the run's state now: a queued run's stop is a cancel
    this.onStopped = onStopped;
    this.busy = false;
    this.answer = doc.querySelector("[data-action-answer]");
    this.buttons = new Map([...doc.querySelectorAll("[data-run-action]")].map((b) => [b.dataset.runAction, b]));
    for (const [action, button] of this.buttons) button.addEventListener("click", () => this.run(action, button));
  }

  // Offer exactly `actions` (the server's list), hiding the rest.
  show(actions) {
    const allowed = new Set(actions || []);
    for (const [action, button] of this.buttons) button.hidden = !allowed.has(action);
  }

  async run(action, button) {
    if (this.busy) return;
    const body = action === "cancel" ? await askStop(this.doc, this.state()) : {};
    if (body === null) return;
    this.busy = true;
    button.disabled = true;
    try {
      const outcome = await act(this.api, this.runId, action, this.answer, body);
      if (outcome.ok && action === "cancel") this.onStopped(outcome.run);
    } finally {
      this.busy = false;
      button.disabled = false;
    }
  }
}

// The runs tables (runs/table.html): each row's form posts through the API instead, and the answer
// appears in that row.
export function bindRunTables(doc = document) {
  const api = new Api();
  for (const form of doc.querySelectorAll("form[data-run-actions]")) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const button = ev.submitter;
      const action = button && button.value;
      if (!action) return;
      const row = form.closest("tr");
      const body = action === "cancel" ? await askStop(doc, row.querySelector(".state").textContent.trim()) : {};
      if (body === null) return;
      const box = row.querySelector("[data-action-answer]");
      button.disabled = true;
      try {
        const outcome = await act(api, form.dataset.runActions, action, box, body);
        if (outcome.ok && action === "cancel") button.remove(); // asked once: the row offers no second stop
      } finally {
        button.disabled = false;
      }
    });
  }
}

if (typeof document !== "undefined" && document.querySelector("[data-run-table]")) bindRunTables();
