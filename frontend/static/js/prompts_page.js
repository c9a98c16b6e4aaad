// The prompts view of a run (/runs/<id>/prompts/, /share/<token>/prompts/): the run's per-prompt
// statistics from /api/runs/<id>/prompts/, sorted and filtered by status on the server, in keyset
// pages. Read on load and on Reload, and again when the run's websocket says a step's statistics
// were written (a `prompt_stats` event), at most once per REFRESH_MS: a table re-sorted under the
// reader's eyes at every step would be hard to read. Each row links to its rollouts over time in
// the run page's inspector.

import { Api, esc, fmt, readConfig } from "./api.js";
import { KeysetPager } from "./keyset_pager.js";
import { initTheme } from "./theme.js";
import { RunSocket, showLiveState } from "./ws.js";

const PAGE = 50;
const REFRESH_MS = 2000;
const SPARK_W = 140;
const SPARK_H = 26;

// Each draw's pass rate (passed / samples), oldest to newest, as a small SVG line with dots.
export function sparkline(history) {
  const points = history.filter(([, , samples]) => samples > 0).map(([step, passed, samples]) => [step, passed / samples]);
  if (!points.length) return '<span class="muted">–</span>';
  const x = (i) => (points.length === 1 ? SPARK_W / 2 : 3 + (i * (SPARK_W - 6)) / (points.length - 1));
  const y = (rate) => 3 + (1 - rate) * (SPARK_H - 6);
  const coords = points.map(([, rate], i) => `${x(i).toFixed(1)},${y(rate).toFixed(1)}`);
  const title = points.map(([step, rate]) => `step ${step}: ${fmt(rate, 2)}`).join("\n");
  const dots = points.map(([, rate], i) => `<circle cx="${x(i).toFixed(1)}" cy="${y(rate).toFixed(1)}" r="1.8"></circle>`).join("");
  return `<svg class="sparkline" width="${SPARK_W}" height="${SPARK_H}" viewBox="0 0 ${SPARK_W} ${SPARK_H}" role="img"
    aria-label="pass rate per draw"><title>${esc(title)}</title><line class="axis" x1="0" x2="${SPARK_W}" y1="${y(0.5)}" y2="${y(0.5)}"></line>
    <polyline points="${coords.join(" ")}"></polyline>${dots}</svg>`;
}

export class PromptsTable {
  constructor(root, { api, config }) {
    this.root = root;
    this.api = api;
    this.config = config;
    this.form = root.querySelector("form.prompts-filters");
    this.tbody = root.querySelector("tbody");
    this.more = root.querySelector("[data-load-more]");
    this.shown = root.querySelector("[data-shown]");
    this.items = [];
    this.pager = new KeysetPager((cursor) => this.page(cursor)); // reset by reload, superseded by refresh
    this.loading = false; // a read of rows is under way (reload, load more or refresh)
    this.form.addEventListener("change", () => this.reload());
    this.more.addEventListener("click", () => this.loadMore());
  }

  params() {
    const data = new FormData(this.form);
    const params = { order: data.get("order") || this.config.default_order, limit: PAGE };
    if (data.get("status")) params.status = data.get("status");
    return params;
  }

  // One keyset page of rows under the reader's sort and filter, from `cursor` (null: the first).
  page(cursor) {
    const params = this.params();
    if (cursor) params.cursor = cursor;
    return this.api.get(`/api/runs/${this.config.run.id}/prompts/`, params);
  }

  async reload() {
    this.pager.reset();
    this.items = [];
    this.tbody.innerHTML = "";
    await this.loadMore(true);
  }

  async loadMore(first = false) {
    if (!first && (!this.pager.hasMore || this.loading)) return;
    const version = this.pager.version;
    this.loading = true;
    this.root.classList.add("is-loading");
    try {
      const page = await this.pager.next(first);
      if (page === null) return; // a reload came meanwhile: its rows are the ones to show
      this.items.push(...page.results);
      this.tbody.insertAdjacentHTML("beforeend", page.results.map((it) => this.rowHtml(it)).join(""));
      this.showCounts(page.counts);
    } catch (err) {
      this.tbody.innerHTML = `<tr class="error"><td colspan="8">${esc(err.message)}</td></tr>`;
    } finally {
      if (version === this.pager.version) {
        this.loading = false;
        this.root.classList.remove("is-loading");
        this.showFoot();
      }
    }
  }

  // The rows read again (a step's statistics arrived): the reader's sort and filter, and as many
  // rows as they had loaded, swapped in at once so the table never empties under their eyes.
  // False when it did not apply: a read was under way, or one the reader asked for overtook it.
  async refresh() {
    if (this.loading) return false;
    const read = this.pager.readFirst(Math.max(this.items.length, PAGE));
    const version = this.pager.version; // readFirst's own
    let fresh;
    this.loading = true;
    try {
      fresh = await read;
    } finally {
      if (version === this.pager.version) this.loading = false;
    }
    if (fresh === null) return false;
    this.items = fresh.results;
    this.tbody.innerHTML = this.items.map((it) => this.rowHtml(it)).join("");
    this.showCounts(fresh.last.counts);
    this.showFoot();
    return true;
  }

  showFoot() {
    this.more.hidden = !this.pager.hasMore;
    if (!this.items.length && !this.tbody.querySelector("tr.error")) {
      this.tbody.innerHTML = '<tr class="empty"><td colspan="8" class="muted">No prompt statistics yet, or none with this status.</td></tr>';
    }
    this.shown.textContent = `${this.items.length}${this.pager.hasMore ? "+" : ""} shown`;
  }

  showCounts(counts) {
    let total = 0;
    for (const [status, n] of Object.entries(counts || {})) {
      total += n;
      const label = this.form.querySelector(`[data-count="${status}"]`);
      if (label) label.textContent = `(${n})`;
    }
    this.form.querySelector('[data-count=""]').textContent = `(${total})`;
  }

  // The run page's inspector, filtered to this row's rollouts (its "@k" repeats too).
  rolloutsUrl(promptId) {
    const query = new URLSearchParams({ [this.config.prompt_param]: promptId });
    return `${this.config.run_url}?${query}#rollouts`;
  }

  rowHtml(it) {
    const status = this.config.statuses[it.status] || it.status;
    const text = it.preview ? `<span class="prompt-text">${esc(it.preview)}</span>` : "";
    return `<tr data-prompt-id="${esc(it.prompt_id)}" data-status="${esc(it.status)}">
      <td class="prompt-cell" title="${esc(it.preview)}">${text}<span class="muted mono">${esc(it.prompt_id)}</span></td>
      <td><span class="badge prompt-status status-${esc(it.status)}">${esc(status)}</span></td>
      <td class="num" data-field="pass_rate">${fmt(it.pass_rate, 3)}</td>
      <td class="num muted" data-field="pass_rate_std">${fmt(it.pass_rate_std, 2)}</td>
      <td class="num" data-field="draws">${it.draws}</td>
      <td class="num" data-field="last_step">${it.last_step}</td>
      <td class="spark" title="${it.history_length} draws">${sparkline(it.history)}</td>
      <td><a href="${esc(this.rolloutsUrl(it.prompt_id))}" data-rollouts-link>rollouts →</a></td>
    </tr>`;
  }
}

// Runs `fn` at most once per `ms`: a poke within `ms` of the last run waits for the end of that
// window, and the pokes meanwhile become that one run (a burst of steps, one re-read of the newest).
export class Throttle {
  constructor(fn, ms) {
    this.fn = fn;
    this.ms = ms;
    this.last = -Infinity;
    this.timer = null;
  }

  poke() {
    if (this.timer !== null) return;
    const wait = Math.max(0, this.last + this.ms - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.last = Date.now();
      this.fn();
    }, wait);
  }
}

// Follows the run's stream for the table: each step whose statistics were written re-reads it
// (throttled), and the header says up to which step the table's statistics go ("Statistics up to step 58").
export class LiveTable {
  constructor(table, { run, updated, step }) {
    this.table = table;
    this.run = run;
    this.el = { updated, step };
    this.latest = null; // the newest step whose statistics were announced
    this.throttle = new Throttle(() => this.refresh(), REFRESH_MS);
  }

  seen(step) {
    if (this.latest === null || step > this.latest) this.latest = step;
    this.throttle.poke();
  }

  async refresh() {
    const step = this.latest;
    try {
      if (!(await this.table.refresh())) {
        this.throttle.poke(); // busy, or a read the reader asked for overtook it: try again
        return;
      }
      this.el.updated.textContent = `Statistics up to step ${step}`;
      this.run.last_step = Math.max(this.run.last_step ?? 0, step);
      this.el.step.textContent = `${this.run.last_step}${this.run.total_steps ? ` / ${this.run.total_steps}` : ""}`;
    } catch (err) {
      this.el.updated.textContent = `could not update: ${err.message}`; // the rows shown stay; the next step tries again
    }
  }
}

function follow(config, live) {
  const liveState = document.querySelector("[data-live-state]");
  const socket = new RunSocket({
    runId: config.run.id,
    cursor: config.cursor,
    shareToken: config.share_token,
    onState: (s) => showLiveState(liveState, s),
    onClosed: (code) => {
      if (code === 4403 || code === 4404) document.querySelector("[data-access-lost]").hidden = false;
    },
    onEvent: (ev) => {
      if (ev.kind === "prompt_stats") live.seen(ev.step);
    },
  });
  socket.connect();
  return socket;
}

async function main() {
  initTheme();
  const config = readConfig("prompts-config");
  const api = new Api({ shareToken: config.share_token });
  const table = new PromptsTable(document.querySelector("[data-prompts]"), { api, config });
  document.querySelector("[data-prompts-refresh]").addEventListener("click", () => table.reload());
  await table.reload();
  const live = new LiveTable(table, {
    run: config.run,
    updated: document.querySelector("[data-prompts-updated]"),
    step: document.querySelector("[data-run-step]"),
  });
  const socket = follow(config, live);
  window.studioPromptsPage = { table, live, socket }; // for the browser test and the console
  document.body.dataset.ready = "1";
}

if (typeof document !== "undefined" && document.querySelector("[data-prompts]")) {
  main().catch((err) => {
    console.error(err);
    const box = document.querySelector("[data-page-error]");
    if (box) {
      box.hidden = false;
      box.innerHTML = `Could not load the prompts: ${esc(err.message)}`;
    }
  });
}
