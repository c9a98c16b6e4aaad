// Rollout inspector: a filtered, keyset-paginated list of a run's rollouts that grows as
// new ones arrive on the websocket, and a detail view (prompt, completion, per-criterion
// scores, the other completions of the same group side by side, notes). A multi-turn episode
// reads as a conversation: each assistant turn, its tool calls (arguments, result or error), the
// observation that followed (not trained on), the turn's reward and advantage.
// Rows are added and removed one by one (a live step inserts its rows, it never re-renders the list).
// Keyboard: j / ArrowDown next, k / ArrowUp previous, Enter open, Esc close.

import { esc, fmt, needRules } from "./api.js";

const PAGE = 50;
// The list holds at most this many rows while live rollouts flow in at its top: the oldest rows go
// (and "Load more" brings them back), so a long live run never makes it unbounded. Each insert
// lays out the whole table again, so fewer rows cost less: 200 is ten screens of the list.
const LIVE_ROWS_MAX = 200;
// The list counts as scrolled to the top within this many pixels of it: new rollouts flow in
// there; further down they wait behind the banner, so the rows being read do not move.
const TOP_SLACK_PX = 4;
// The form's notes select (a form field, not an API parameter) and its value for "any note";
// every other value is a tag.
const NOTE_FIELD = "note";
const ANY_NOTE = "*";
// The one order in which a rollout that just arrived belongs at the top of the list.
const NEWEST_FIRST = "-step";

// The API parameters the filter form may send, from the server's rollout rules.
function filterParams(r) {
  return [...r.bounds.map((b) => b.param), ...r.equals, ...r.flags, ...r.counts, ...r.members.map((m) => m.param),
    r.criterion.param, r.criterion.min, r.criterion.max, r.prompt.param, r.text, r.split.param, "order"];
}

function renderText(value) {
  if (Array.isArray(value)) {
    return value
      .map((turn) => `<div class="turn role-${esc(turn.role)}"><span class="role">${esc(turn.role)}</span><pre>${esc(turn.content)}</pre></div>`)
      .join("");
  }
  return `<pre>${esc(value)}</pre>`;
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function toolCallHtml(call) {
  const args = typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {});
  const outcome = call.error
    ? `<pre class="tool-error" title="the tool failed: this error went back to the model">⚠ ${esc(call.error)}</pre>`
    : `<pre class="tool-result">${esc(call.result ?? "")}</pre>`;
  return `<div class="tool-call${call.error ? " has-error" : ""}">
    <div class="tool-head"><span class="tool-name">${esc(call.name || "?")}</span><code class="tool-args">${esc(args)}</code>
      <span class="muted">${call.seconds != null ? `${fmt(call.seconds, 3)} s` : ""}</span>${call.truncated ? ' <span class="tag">output truncated</span>' : ""}</div>
    ${outcome}</div>`;
}

// One assistant turn of an episode, then the observation that followed it (tool results, a
// simulated user's reply): those tokens were never trained on, and the page says so.
function turnHtml(turn, k) {
  const observation = (turn.observation || []).map(
    (m) => `<div class="obs-message"><span class="role">${esc(m.role)}</span><pre>${esc(m.content)}</pre></div>`,
  );
  return `<article class="turn role-assistant" data-turn="${k}">
    <header class="turn-head"><span class="role">assistant · turn ${k + 1}</span>
      <span class="stat" title="${esc(turn.reason || "")}">reward <b class="turn-reward reward ${rewardClass(turn.reward)}">${fmt(turn.reward, 3)}</b>${turn.reason ? ` <span class="turn-reason muted">(${esc(turn.reason)})</span>` : ""}</span>
      <span class="stat">advantage <b class="turn-advantage">${fmt(turn.advantage, 3)}</b></span>
      <span class="muted">${turn.num_tokens} tok · ${esc(turn.finish_reason)}${turn.answered ? " · answered" : ""}</span></header>
    <pre class="turn-text">${esc(turn.text)}</pre>
    ${(turn.tool_calls || []).map(toolCallHtml).join("")}
    ${observation.length ? `<div class="observation" title="Observation tokens: fed to the model, never trained on">
      <span class="obs-label">observation · ${plural(turn.observation_tokens, "token")} · not trained on</span>${observation.join("")}</div>` : ""}
  </article>`;
}

function renderEpisode(turns) {
  return turns.map(turnHtml).join("");
}

function episodeSummary(it) {
  const marks = [];
  if (it.num_turns > 1 || it.tool_calls) marks.push(`<span class="chip">${plural(it.num_turns, "turn")}</span>`);
  if (it.tool_calls) marks.push(`<span class="chip" title="${esc((it.tools_used || []).join(", "))}">${plural(it.tool_calls, "tool call")}</span>`);
  if (it.tool_errors) marks.push(`<span class="tag tool-errors">${plural(it.tool_errors, "tool error")}</span>`);
  if (it.ended_at_limit) marks.push(`<span class="tag" title="the episode ended at its ${esc(it.end_reason)}">at limit</span>`);
  if (it.hinted) marks.push(hintedBadge(it));
  return marks.join("");
}

// A hinted retry of a prompt whose group all failed: its answer began with the start of the
// reference solution (the hint), which the model continued and was never trained on.
function hintedBadge(it) {
  const share = it.hint_fraction != null ? ` ${Math.round(it.hint_fraction * 100)}%` : "";
  return `<span class="tag hinted" data-hinted title="hinted retry: the answer began with${share} of the reference solution">hinted${share}</span>`;
}

// `showAll`: its own "show all" button when the hint came cut (a reference solution can be long).
function hintHtml(r, showAll) {
  return `<div class="hint" title="The hint: the start of the reference solution, given as the start of the answer; never trained on">
    <span class="hint-label">hint · ${Math.round((r.hint_fraction ?? 0) * 100)}% of the solution · not trained on</span><pre data-hint data-full="hint">${esc(r.hint)}</pre>${showAll}</div>`;
}

// Windows of one field from the text/ endpoint, joined: text to text, message to message, and for
// an episode's turns each text of each turn (its text, tool results and errors, observation).
function joinWindows(have, next, field) {
  if (field === "turns") {
    const add = (a, b) => (typeof a === "string" ? a + (b ?? "") : a);
    return have.map((t, i) => ({
      ...t,
      text: add(t.text, next[i].text),
      tool_calls: t.tool_calls.map((c, j) => ({ ...c, result: add(c.result, next[i].tool_calls[j].result), error: add(c.error, next[i].tool_calls[j].error) })),
      observation: joinWindows(t.observation, next[i].observation),
    }));
  }
  if (typeof have === "string") return have + next;
  return have.map((m, i) => {
    if (typeof m === "string") return m + next[i];
    if (m && typeof m.content === "string") return { ...m, content: m.content + next[i].content };
    return m;
  });
}

function chars(n) {
  return `${n.toLocaleString("en-US")} characters`;
}

function rewardClass(r) {
  if (r === null || r === undefined) return "";
  return r > 0 ? "pos" : r < 0 ? "neg" : "zero";
}

export class Inspector {
  /**
   * @param root      element holding the filter form (.filters), list (.rollout-list) and detail (.rollout-detail)
   * @param rules     the server's rules (readRules()): its `rollouts` filters and orders, its `notes` limits
   * @param notes     NotesClient used for the rollout's notes (may be null on read-only pages)
   */
  constructor(root, { api, runId, rules, criteria = [], notes = null, canNote = false }) {
    this.rules = needRules(rules, "rollouts", "Inspector");
    this.noteRules = needRules(rules, "notes", "Inspector");
    this.filterParams = filterParams(this.rules);
    this.root = root;
    this.api = api;
    this.runId = runId;
    this.notes = notes;
    this.canNote = canNote;
    this.criteria = new Set(criteria);
    this.tools = new Set(); // tools the listed episodes called: suggestions for the tool filter
    this.form = root.querySelector("form.filters");
    this.tbody = root.querySelector(".rollout-list tbody");
    this.detail = root.querySelector(".rollout-detail");
    this.more = root.querySelector("[data-load-more]");
    this.listBox = root.querySelector("[data-rollout-list]");
    this.banner = root.querySelector("[data-new-banner]");
    this.count = root.querySelector("[data-count]");
    this.items = [];
    this.ids = new Set(); // ids in this.items: a rollout the socket and a page both bring shows once
    this.selected = -1;
    this.openId = null;
    this.nextCursor = null;
    this.held = []; // live rollouts that match, waiting (newest first) while the list is scrolled away from the top
    this.unseen = 0; // matching live rollouts the banner counts: `held`, or those a reload would bring
    this.version = 0; // bumped by reload and trimTail: a page asked for an older list is dropped
    this.reloads = 0; // a live check asked under older filters is dropped
    this.searching = null; // the server check of live rollouts against a text filter, one at a time
    this.searchQueue = [];
    this.resumeParams = {}; // after rows were trimmed: the bound the next pages keep (see trimTail)
    this.canResume = false; // rows were trimmed and no page has been loaded past them yet
    this.loading = null;
    this.noteMarks = ""; // "rollout:tag|..." of the notes last seen, to tell a change from a re-render
    this.fillCriteria();
    this.bind();
  }

  bind() {
    let timer = null;
    this.form.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.reload(), 250);
    });
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.reload();
    });
    this.form.addEventListener("reset", () => setTimeout(() => this.reload(), 0));
    this.more.addEventListener("click", () => this.loadMore());
    this.banner.addEventListener("click", () => this.showUnseen());
    this.listBox.addEventListener("scroll", () => {
      if (this.held.length && this.atTop()) this.showUnseen();
    });
    this.tbody.addEventListener("click", (ev) => {
      const row = ev.target.closest("tr[data-rollout-id]");
      if (row) this.select(this.indexOf(Number(row.dataset.rolloutId)), true);
    });
    this.detail.addEventListener("click", (ev) => {
      if (ev.target.closest("[data-close]")) this.close();
      const showAll = ev.target.closest("[data-show-all]");
      if (showAll) this.showAll(showAll);
      const sibling = ev.target.closest("[data-open-rollout]");
      if (sibling) this.open(Number(sibling.dataset.openRollout));
    });
    document.addEventListener("keydown", (ev) => this.onKey(ev));
  }

  onKey(ev) {
    const tag = (ev.target.tagName || "").toLowerCase();
    if (["input", "textarea", "select"].includes(tag) || ev.metaKey || ev.ctrlKey || ev.altKey) return;
    if (ev.key === "Enter" && ["button", "a"].includes(tag)) return; // Enter activates the focused control
    if (ev.key === "j" || ev.key === "ArrowDown") this.move(1, ev);
    else if (ev.key === "k" || ev.key === "ArrowUp") this.move(-1, ev);
    else if (ev.key === "Enter" && this.selected >= 0) {
      ev.preventDefault();
      this.select(this.selected, true);
    } else if (ev.key === "Escape" && this.openId !== null) {
      ev.preventDefault();
      this.close();
    }
  }

  move(delta, ev) {
    if (!this.items.length) return;
    ev.preventDefault();
    const next = Math.max(0, Math.min(this.items.length - 1, this.selected + delta));
    // While the detail is open, moving also opens the next rollout: read them one after another.
    this.select(next, this.openId !== null);
    if (next >= this.items.length - 5 && (this.nextCursor || this.canResume)) this.loadMore();
  }

  // Filters named in the page's address (?prompt=<id> from the prompts view) fill the form.
  prefill(search) {
    for (const name of this.filterParams) {
      const control = this.form.elements[name];
      if (control && search.get(name)) control.value = search.get(name);
    }
  }

  params() {
    const { criterion, notes } = this.rules;
    const data = new FormData(this.form);
    const params = {};
    for (const name of [...this.filterParams, NOTE_FIELD]) {
      const v = (data.get(name) || "").toString().trim();
      if (v) params[name] = v;
    }
    if (!params[criterion.param]) {
      delete params[criterion.min]; // the API refuses a score range without a criterion
      delete params[criterion.max];
    }
    const note = params[NOTE_FIELD];
    if (note) {
      if (note === ANY_NOTE) params[notes.any] = "1";
      else params[notes.tag] = note;
      delete params[NOTE_FIELD];
    }
    return params;
  }

  // Tags of the run's notes join the suggested ones in the notes filter.
  fillNoteTags() {
    const select = this.form.elements[NOTE_FIELD];
    if (!select || !this.notes) return;
    const have = new Set([...select.options].map((o) => o.value));
    for (const tag of [...new Set(this.notes.notes.map((n) => n.tag).filter(Boolean))].sort()) {
      if (have.has(tag)) continue;
      const opt = document.createElement("option");
      opt.value = tag;
      opt.textContent = `tagged ${tag}`;
      select.appendChild(opt);
    }
  }

  // Notes loaded, changed or only re-filtered in the notes panel: mark the rows; when the list is
  // filtered by notes and the noted rollouts changed, re-ask the server which rollouts match.
  onNotesChanged() {
    this.fillNoteTags();
    const marks = this.notes ? this.notes.notes.filter((n) => n.rollout).map((n) => `${n.rollout}:${n.tag}`).sort().join("|") : "";
    const changed = marks !== this.noteMarks;
    this.noteMarks = marks;
    const params = this.params();
    if (changed && (params[this.rules.notes.any] || params[this.rules.notes.tag])) this.reload();
    else this.renderRows();
  }

  fillCriteria() {
    const select = this.form.elements.criterion;
    const have = new Set([...select.options].map((o) => o.value));
    for (const name of [...this.criteria].sort()) {
      if (have.has(name)) continue;
      const opt = document.createElement("option");
      opt.value = opt.textContent = name;
      select.appendChild(opt);
    }
  }

  fillTools() {
    const list = document.getElementById?.("rollout-tools");
    if (!list) return;
    const have = new Set([...list.options].map((o) => o.value));
    for (const name of [...this.tools].sort()) {
      if (have.has(name)) continue;
      const opt = document.createElement("option");
      opt.value = name;
      list.appendChild(opt);
    }
  }

  async reload() {
    this.version += 1;
    this.reloads += 1;
    this.items = [];
    this.ids.clear();
    this.selected = -1;
    this.nextCursor = null;
    this.held = [];
    this.searchQueue = [];
    this.resumeParams = {};
    this.canResume = false;
    this.setUnseen(0);
    this.tbody.innerHTML = "";
    await this.loadMore(true);
  }

  // The next page, or the first (`first`: a reload). A page asked for before the list was reloaded
  // or trimmed no longer follows its last row, and is dropped.
  async loadMore(first = false) {
    if (this.loading && !first) return this.loading;
    if (!first && !this.nextCursor && !this.canResume) return;
    const params = { ...this.params(), ...this.resumeParams, limit: PAGE };
    if (!first && this.nextCursor) params.cursor = this.nextCursor;
    this.canResume = false;
    const version = this.version;
    this.root.classList.add("is-loading");
    const request = this.api
      .get(`/api/runs/${this.runId}/rollouts/`, params)
      .then((page) => {
        if (version !== this.version) return;
        this.nextCursor = page.next_cursor || null;
        this.append(page.results, false);
      })
      .catch((err) => {
        if (version !== this.version) return;
        this.tbody.insertAdjacentHTML("beforeend", `<tr class="error"><td colspan="8">${esc(err.message)}</td></tr>`);
      })
      .finally(() => {
        if (this.loading !== request) return;
        this.loading = null;
        this.root.classList.remove("is-loading");
        this.more.hidden = !this.nextCursor && !this.canResume;
      });
    this.loading = request;
    return request;
  }

  // Rows already listed are skipped: the websocket's cursor comes from the metrics response
  // while the list loads concurrently, so a step committed in between arrives both ways.
  // Only the new rows are inserted; the rows already shown stay as they are.
  append(items, atTop) {
    const fresh = [];
    for (const it of items) {
      if (this.ids.has(it.id)) continue;
      this.ids.add(it.id);
      fresh.push(it);
      for (const c of Object.keys(it.scores || {})) this.criteria.add(c);
      for (const t of it.tools_used || []) this.tools.add(t);
    }
    this.fillCriteria();
    this.fillTools();
    if (fresh.length) {
      this.tbody.querySelector("tr.empty")?.remove();
      if (atTop) {
        for (const row of this.tbody.querySelectorAll("tr.is-new")) row.classList.remove("is-new");
        for (const it of this.items) it._new = false;
      }
      this.tbody.insertAdjacentHTML(atTop ? "afterbegin" : "beforeend", fresh.map((it) => this.rowHtml(it)).join(""));
    }
    if (atTop) {
      this.items = [...fresh, ...this.items];
      if (this.selected >= 0) this.selected += fresh.length;
    } else {
      this.items.push(...fresh);
    }
    if (!this.items.length) this.renderRows();
    this.showCount();
  }

  rowHtml(it) {
    const scores = Object.entries(it.scores || {})
      .map(([c, s]) => `<span class="chip" title="${esc(c)}">${esc(c)} ${fmt(s, 3)}</span>`)
      .join("");
    const marks = (this.notes ? this.notes.forRollout(it.id) : [])
      .map((n) => `<span class="tag" title="${esc(n.text)}">${esc(n.tag || "note")}</span>`)
      .join("");
    const selected = this.selected >= 0 && this.items[this.selected]?.id === it.id;
    return `<tr data-rollout-id="${it.id}" class="${selected ? "selected" : ""} ${it._new ? "is-new" : ""}">
      <td class="num">${it.step}</td>
      <td class="prompt-cell" title="${esc(it.prompt_preview)}"><span class="prompt-text">${esc(it.prompt_preview)}</span><span class="muted mono">${esc(it.prompt_id)}#${it.sample_index}</span></td>
      <td class="num reward ${rewardClass(it.reward)}">${fmt(it.reward, 3)}</td>
      <td class="num">${fmt(it.advantage, 3)}${this.splitTag(it)}</td>
      <td class="num">${it.num_tokens}</td>
      <td><span class="finish finish-${esc(it.finish_reason)}">${esc(it.finish_reason)}</span></td>
      <td class="scores col-wide">${scores}</td>
      <td class="preview">${marks}${episodeSummary(it)}${esc(it.preview)}</td>
    </tr>`;
  }

  // A validation rollout (a held-out prompt sampled after the step) says so; a training rollout
  // that was not trained on (dynamic sampling dropped its group, or the batch was full) says that.
  splitTag(it) {
    if ((it.split || this.rules.split.default) !== this.rules.split.default) {
      return ` <span class="tag split-${esc(it.split)}" title="sampled from a held-out prompt after this step; never trained on">${esc(it.split)}</span>`;
    }
    return it.trained === false ? ' <span class="tag untrained" title="not trained: its group was dropped by dynamic sampling or generated beyond the batch">untrained</span>' : "";
  }

  // The whole list at once: after a reload's first page, or when note marks change.
  renderRows() {
    this.tbody.innerHTML = this.items.map((it) => this.rowHtml(it)).join("");
    if (!this.items.length) {
      this.tbody.innerHTML = '<tr class="empty"><td colspan="8" class="muted">No rollouts yet, or none match the filters.</td></tr>';
    }
    this.showCount();
  }

  showCount() {
    this.count.textContent = `${this.items.length}${this.nextCursor || this.canResume ? "+" : ""} shown`;
  }

  indexOf(rolloutId) {
    return this.items.findIndex((it) => it.id === rolloutId);
  }

  atTop() {
    return (this.listBox.scrollTop || 0) <= TOP_SLACK_PX;
  }

  // New rollouts from the websocket. Those that pass the filters go straight to the top when the
  // list is sorted newest first and scrolled to the top; otherwise the banner counts them. A text
  // filter reads whole prompts and completions, which a live summary does not carry: the server
  // says which of the new rollouts match it (the other filters are checked here first).
  onLive(items) {
    const params = this.params();
    const fits = items.filter((it) => !this.ids.has(it.id) && this.matches(it, params));
    if (!fits.length) return;
    if (params[this.rules.text]) this.searchLive(fits);
    else this.takeLive(fits, params);
  }

  takeLive(fits, params) {
    const newestFirst = (params.order || this.rules.default_order) === NEWEST_FIRST;
    const newest = [...fits].sort((a, b) => b.step - a.step || b.id - a.id);
    if (newestFirst && this.atTop() && !this.held.length) {
      for (const it of newest) it._new = true;
      this.append(newest, true);
      this.trimTail(LIVE_ROWS_MAX);
      // Flash once: a row rendered again later (notes changed) must not restart the animation.
      for (const it of newest) delete it._new;
    } else {
      if (newestFirst) this.held = [...newest, ...this.held].slice(0, LIVE_ROWS_MAX);
      this.setUnseen(this.unseen + newest.length);
    }
  }

  // The banner: held rollouts go in at the top (the list scrolls there); in any other order the
  // new rollouts have no one place in the list, and a reload fetches it again.
  showUnseen() {
    if (!this.held.length) {
      this.reload();
      return;
    }
    const held = this.held;
    // More arrived than were held: the listed rows no longer follow the held ones, so they go.
    const gap = this.unseen > held.length;
    this.held = [];
    this.setUnseen(0);
    this.append(held, true);
    this.trimTail(gap ? held.length : LIVE_ROWS_MAX);
    this.listBox.scrollTop = 0;
  }

  // Keeps the first `keep` rows (the list is newest first: the oldest go). The next "Load more"
  // goes on from the last row kept, by the step bound of the server's filters: rows of that step
  // still listed come back from it too, and are skipped as already shown.
  trimTail(keep) {
    if (this.items.length <= keep) return;
    this.version += 1;
    const gone = this.items.splice(keep);
    for (const it of gone) {
      this.ids.delete(it.id);
      this.tbody.querySelector(`tr[data-rollout-id="${it.id}"]`)?.remove();
    }
    if (this.selected >= this.items.length) this.selected = -1;
    const stepMax = this.rules.bounds.find((b) => b.field === "step" && b.bound === "max").param;
    const last = this.items[this.items.length - 1];
    const asked = this.params()[stepMax];
    this.resumeParams = { [stepMax]: asked === undefined ? last.step : Math.min(Number(asked), last.step) };
    this.nextCursor = null;
    this.canResume = true;
    this.more.hidden = false;
    this.showCount();
  }

  setUnseen(count) {
    this.unseen = count;
    this.banner.textContent = `${count} new ${count === 1 ? "rollout matches" : "rollouts match"}: show them`;
    this.banner.hidden = count === 0;
  }

  // Asks the server which of these live rollouts match the filters (the text one among them):
  // the list filtered as shown, over just their steps. One question at a time; rollouts that
  // arrive meanwhile wait for the next.
  searchLive(fits) {
    this.searchQueue.push(...fits);
    if (this.searching) return;
    const reloads = this.reloads;
    const batch = this.searchQueue.splice(0);
    const steps = batch.map((it) => it.step);
    const params = { ...this.params(), limit: LIVE_ROWS_MAX };
    for (const { param, bound } of this.rules.bounds.filter((b) => b.field === "step")) {
      const [own, pick] = bound === "min" ? [Math.min(...steps), Math.max] : [Math.max(...steps), Math.min];
      params[param] = params[param] === undefined ? own : pick(own, Number(params[param])); // the filter's, if narrower
    }
    const wanted = new Set(batch.map((it) => it.id));
    this.searching = this.api
      .get(`/api/runs/${this.runId}/rollouts/`, params)
      .then((page) => {
        if (reloads !== this.reloads) return;
        const hits = page.results.filter((it) => wanted.has(it.id) && !this.ids.has(it.id));
        if (hits.length) this.takeLive(hits, params);
      })
      .catch(() => {}) // a failed check shows nothing new; the next reload lists them
      .finally(() => {
        this.searching = null;
        if (this.searchQueue.length) this.searchLive([]);
      });
  }

  // Whether a rollout summary passes the filters in `p`: the server's filters (rollout_query),
  // applied by the rules it hands the page.
  matches(it, p) {
    const r = this.rules;
    const num = (v) => (v === undefined ? null : Number(v));
    const within = (v, lo, hi) => (lo === null || v >= lo) && (hi === null || v <= hi);
    for (const { param, field, bound } of r.bounds) {
      const limit = num(p[param]);
      if (limit !== null && !(bound === "min" ? within(it[field], limit, null) : within(it[field], null, limit))) return false;
    }
    for (const field of r.equals) if (p[field] && it[field] !== p[field]) return false;
    for (const field of r.flags) {
      if (p[field] && it[field] !== r.flag_true.includes(p[field].trim().toLowerCase())) return false;
    }
    for (const field of r.counts) {
      if (p[field] && (it[field] > 0) !== r.flag_true.includes(p[field].trim().toLowerCase())) return false;
    }
    for (const { param, field } of r.members) if (p[param] && !(it[field] || []).includes(p[param].trim())) return false;
    const row = (p[r.prompt.param] || "").trim(); // a dataset row: its id, or a repeat's "<id>@<k>"
    if (row && it[r.prompt.field] !== row && !String(it[r.prompt.field]).startsWith(row + r.prompt.repeat_mark)) return false;
    const split = p[r.split.param] || r.split.default;
    if (split !== r.split.all && (it.split || r.split.default) !== split) return false;
    if (p[r.notes.any] || p[r.notes.tag]) return false; // a rollout that just arrived carries no note yet
    const criterion = p[r.criterion.param];
    if (criterion) {
      const s = (it.scores || {})[criterion];
      if (s === undefined || !within(s, num(p[r.criterion.min]), num(p[r.criterion.max]))) return false;
    }
    return true;
  }

  select(index, open) {
    if (index < 0) return;
    this.selected = index;
    for (const row of this.tbody.querySelectorAll("tr.selected")) row.classList.remove("selected");
    const row = this.tbody.querySelector(`tr[data-rollout-id="${this.items[index].id}"]`);
    if (row) {
      row.classList.add("selected");
      row.scrollIntoView({ block: "nearest" });
    }
    if (open) this.open(this.items[index].id);
  }

  async open(rolloutId) {
    this.openId = rolloutId;
    this.root.classList.add("has-detail");
    this.detail.hidden = false;
    // Bring list and detail into view together when the inspector sits below the charts.
    const top = this.root.getBoundingClientRect().top;
    if (top < 0 || top > window.innerHeight * 0.4) this.root.scrollIntoView({ block: "start" });
    this.detail.innerHTML = `<div class="detail-loading">Loading rollout ${rolloutId}…</div>`;
    let r;
    try {
      r = await this.api.get(`/api/runs/${this.runId}/rollouts/${rolloutId}/`);
    } catch (err) {
      this.detail.innerHTML = `<div class="error">${esc(err.message)}</div>`;
      return;
    }
    if (this.openId !== rolloutId) return; // the user moved on while it loaded
    this.renderDetail(r);
  }

  close() {
    this.openId = null;
    this.detail.hidden = true;
    this.root.classList.remove("has-detail");
    const row = this.tbody.querySelector("tr.selected");
    if (row) row.focus?.();
  }

  renderDetail(r) {
    const criteria = Object.entries(r.scores || {})
      .map(([name, s]) => {
        const score = typeof s === "object" && s !== null ? s : { score: s };
        return `<tr><th>${esc(name)}</th><td class="num ${rewardClass(score.score)}">${fmt(score.score, 4)}</td>
          <td>${score.error ? `<span class="error">${esc(score.error)}</span>` : esc(score.explanation || "")}</td></tr>`;
      })
      .join("");
    const group = [...(r.group || [])].sort((a, b) => a.sample_index - b.sample_index);
    const siblings = group
      .map(
        (g) => `<article class="sibling ${g.id === r.id ? "current" : ""}" data-open-rollout="${g.id}" title="Open this completion">
          <header><span class="mono">#${g.sample_index}</span>
            <span class="reward ${rewardClass(g.reward)}">${fmt(g.reward, 3)}</span>
            <span class="muted">adv ${fmt(g.advantage, 3)} · ${g.num_tokens} tok · ${esc(g.finish_reason)}</span></header>
          ${renderText(g.completion ?? g.preview)}
          ${g.truncated?.completion ? `<span class="muted">… ${chars(g.truncated.completion)} in all: open it to read them</span>` : ""}
        </article>`,
      )
      .join("");
    this.detail.innerHTML = `
      <header class="detail-head">
        <div>
          <h3>Step ${r.step}${this.splitTag(r)} · <span class="mono">${esc(r.prompt_id)}</span> · sample ${r.sample_index}${group.length ? ` of ${group.length}` : ""}</h3>
          <div class="stats">
            <span class="stat">reward <b class="reward ${rewardClass(r.reward)}" data-field="reward">${fmt(r.reward, 4)}</b></span>
            <span class="stat">advantage <b>${fmt(r.advantage, 4)}</b></span>
            <span class="stat">length <b>${r.num_tokens}</b> tokens</span>
            <span class="stat">finish <b class="finish finish-${esc(r.finish_reason)}">${esc(r.finish_reason)}</b></span>
            ${r.hinted ? hintedBadge(r) : ""}
            ${r.turns ? `<span class="stat">${plural(r.num_turns, "turn")} · ${plural(r.tool_calls, "tool call")}${r.tool_errors ? ` · <b class="error">${plural(r.tool_errors, "tool error")}</b>` : ""} · ended <b data-field="end_reason">${esc(r.end_reason)}</b></span>` : ""}
          </div>
        </div>
        <button type="button" class="icon" data-close title="Close (Esc)">✕</button>
      </header>
      <section><h4>Prompt</h4><div class="textblock prompt" data-full="prompt">${renderText(r.prompt)}</div>${this.showAllButton(r, "prompt")}</section>
      ${r.turns
        ? `<section><h4>Episode</h4><div class="textblock completion episode" data-full="turns">${renderEpisode(r.turns)}</div>${this.showAllButton(r, "turns")}</section>`
        : `<section><h4>Completion</h4><div class="textblock completion">${r.hinted ? hintHtml(r, this.showAllButton(r, "hint")) : ""}<div data-full="completion">${renderText(r.completion)}</div></div>${this.showAllButton(r, "completion")}</section>`}
      <section><h4>Criteria</h4><table class="criteria">${criteria || '<tr><td class="muted">no criterion scores</td></tr>'}</table></section>
      ${group.length > 1 ? `<section><h4>Group: ${group.length} completions of this prompt</h4><div class="siblings">${siblings}</div></section>` : ""}
      <section class="rollout-notes"><h4>Notes</h4><div data-notes-list></div>${this.canNote ? this.noteForm() : ""}</section>`;
    if (this.notes) this.notes.attachRollout(this.detail.querySelector(".rollout-notes"), r.id);
    const current = this.detail.querySelector(".sibling.current");
    const strip = this.detail.querySelector(".siblings");
    if (current && strip) strip.scrollLeft = current.offsetLeft - strip.offsetLeft - 8; // this completion in view
  }

  // Long texts come cut (the server's cap); the button reads the rest from the text/ endpoint and
  // replaces its field's block (data-full) only: the hint sits inside the completion's block.
  showAllButton(r, field) {
    const full = (r.truncated || {})[field];
    if (!full) return "";
    return `<button type="button" class="show-all" data-show-all="${field}" data-rollout="${r.id}">show all ${chars(full)}</button>`;
  }

  async showAll(button) {
    const field = button.dataset.showAll;
    const rolloutId = Number(button.dataset.rollout);
    const block = button.closest("section").querySelector(`[data-full="${field}"]`);
    button.disabled = true;
    button.textContent = "loading…";
    let value = null;
    let offset = 0;
    try {
      while (offset !== null) {
        const page = await this.api.get(`/api/runs/${this.runId}/rollouts/${rolloutId}/text/`, { field, offset });
        if (this.openId !== rolloutId) return; // the user moved on while it loaded
        value = value === null ? page.value : joinWindows(value, page.value, field);
        offset = page.next_offset;
      }
    } catch (err) {
      button.textContent = err.message;
      button.disabled = false;
      return;
    }
    if (field === "hint") block.textContent = value;
    else block.innerHTML = field === "turns" ? renderEpisode(value) : renderText(value);
    button.remove();
  }

  noteForm() {
    const { quick_tags: quick, tag_max: tagMax, text_max: textMax } = this.noteRules;
    return `<form class="note-form" data-note-form>
      <div class="quick-tags">
        ${quick.map((tag) => `<button type="button" data-tag="${esc(tag)}">${esc(tag)}</button>`).join("\n        ")}
      </div>
      <input name="tag" placeholder="tag (optional)" list="note-tags" maxlength="${tagMax}">
      <textarea name="text" rows="2" placeholder="Note on this rollout" required maxlength="${textMax}"></textarea>
      <button type="submit" class="primary">Add note</button>
    </form>`;
  }
}
