// The rollout list: a run's rollouts, filtered (rollout_filters.js) and keyset-paginated, that
// grows as new ones arrive on the websocket. A row opens its rollout in the detail beside the list
// (rollout_detail.js): the list only calls its open(id) and close() and reads its isOpen.
// Rows are added and removed one by one (a live step inserts its rows, it never re-renders the list).
// Keyboard: j / ArrowDown next, k / ArrowUp previous, Enter open, Esc close.

import { esc, fmt, needRules } from "./api.js";
import { KeysetPager } from "./keyset_pager.js";
import { RolloutFilters } from "./rollout_filters.js";
import { hintedBadge, plural, rewardClass, splitTag } from "./rollout_marks.js";

const PAGE = 50;
// The list holds at most this many rows while live rollouts flow in at its top: the oldest rows go
// (and "Load more" brings them back), so a long live run never makes it unbounded. Each insert
// lays out the whole table again, so fewer rows cost less: 200 is ten screens of the list.
const LIVE_ROWS_MAX = 200;
// The list counts as scrolled to the top within this many pixels of it: new rollouts flow in
// there; further down they wait behind the banner, so the rows being read do not move.
const TOP_SLACK_PX = 4;
// The one order in which a rollout that just arrived belongs at the top of the list.
const NEWEST_FIRST = "-step";

function episodeSummary(it) {
  const marks = [];
  if (it.num_turns > 1 || it.tool_calls) marks.push(`<span class="chip">${plural(it.num_turns, "turn")}</span>`);
  if (it.tool_calls) marks.push(`<span class="chip" title="${esc((it.tools_used || []).join(", "))}">${plural(it.tool_calls, "tool call")}</span>`);
  if (it.tool_errors) marks.push(`<span class="tag tool-errors">${plural(it.tool_errors, "tool error")}</span>`);
  if (it.ended_at_limit) marks.push(`<span class="tag" title="the episode ended at its ${esc(it.end_reason)}">at limit</span>`);
  if (it.hinted) marks.push(hintedBadge(it));
  return marks.join("");
}

export class RolloutList {
  /**
   * @param root      the inspector's element: filter form (.filters), list (.rollout-list), banner, count, "Load more"
   * @param rules     the server's rules (readRules()): its `rollouts` filters and orders
   * @param criteria  criterion names the run scores, offered by the filter before any row shows them
   * @param notes     NotesClient whose notes mark the rows (may be null)
   * @param detail    the RolloutDetail that rows open in
   */
  constructor(root, { api, runId, rules, criteria = [], notes = null, detail }) {
    this.rules = needRules(rules, "rollouts", "RolloutList");
    this.root = root;
    this.api = api;
    this.runId = runId;
    this.notes = notes;
    this.detail = detail;
    this.filters = new RolloutFilters(root.querySelector("form.filters"), { rules, criteria, notes, onChange: () => this.reload() });
    this.tbody = root.querySelector(".rollout-list tbody");
    this.more = root.querySelector("[data-load-more]");
    this.listBox = root.querySelector("[data-rollout-list]");
    this.banner = root.querySelector("[data-new-banner]");
    this.count = root.querySelector("[data-count]");
    this.items = [];
    this.ids = new Set(); // ids in this.items: a rollout the socket and a page both bring shows once
    this.selected = -1;
    // Where "Load more" goes on; reset by reload and trimTail: a page asked for before is dropped.
    this.pager = new KeysetPager((cursor) => this.fetchPage(cursor));
    this.held = []; // live rollouts that match, waiting (newest first) while the list is scrolled away from the top
    this.unseen = 0; // matching live rollouts the banner counts: `held`, or those a reload would bring
    this.reloads = 0; // a live check asked under older filters is dropped
    this.searching = null; // the server check of live rollouts against a text filter, one at a time
    this.searchQueue = [];
    this.resumeParams = {}; // after rows were trimmed: the bound the next pages keep (see trimTail)
    this.canResume = false; // rows were trimmed and no page has been loaded past them yet
    this.loading = null;
    this.noteMarks = ""; // "rollout:tag|..." of the notes last seen, to tell a change from a re-render
    this.bind();
  }

  bind() {
    this.more.addEventListener("click", () => this.loadMore());
    this.banner.addEventListener("click", () => this.showUnseen());
    this.listBox.addEventListener("scroll", () => {
      if (this.held.length && this.atTop()) this.showUnseen();
    });
    this.tbody.addEventListener("click", (ev) => {
      const row = ev.target.closest("tr[data-rollout-id]");
      if (row) this.select(this.indexOf(Number(row.dataset.rolloutId)), true);
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
    } else if (ev.key === "Escape" && this.detail.isOpen) {
      ev.preventDefault();
      this.detail.close();
    }
  }

  move(delta, ev) {
    if (!this.items.length) return;
    ev.preventDefault();
    const next = Math.max(0, Math.min(this.items.length - 1, this.selected + delta));
    // While the detail is open, moving also opens the next rollout: read them one after another.
    this.select(next, this.detail.isOpen);
    if (next >= this.items.length - 5 && (this.pager.hasMore || this.canResume)) this.loadMore();
  }

  // Filters named in the page's address (?prompt=<id> from the prompts view) fill the form.
  prefill(search) {
    this.filters.prefill(search);
  }

  // Notes loaded, changed or only re-filtered in the notes panel: mark the rows; when the list is
  // filtered by notes and the noted rollouts changed, re-ask the server which rollouts match.
  onNotesChanged() {
    this.filters.fillNoteTags();
    const marks = this.notes ? this.notes.notes.filter((n) => n.rollout).map((n) => `${n.rollout}:${n.tag}`).sort().join("|") : "";
    const changed = marks !== this.noteMarks;
    this.noteMarks = marks;
    if (changed && this.filters.byNotes(this.filters.params())) this.reload();
    else this.renderRows();
  }

  async reload() {
    this.pager.reset();
    this.reloads += 1;
    this.items = [];
    this.ids.clear();
    this.selected = -1;
    this.held = [];
    this.searchQueue = [];
    this.resumeParams = {};
    this.canResume = false;
    this.setUnseen(0);
    this.tbody.innerHTML = "";
    await this.loadMore(true);
  }

  // One page of rollouts under the filters, from `cursor` (null: the first, or the first past the
  // rows trimTail kept, bounded by resumeParams).
  fetchPage(cursor) {
    const params = { ...this.filters.params(), ...this.resumeParams, limit: PAGE };
    if (cursor) params.cursor = cursor;
    return this.api.get(`/api/runs/${this.runId}/rollouts/`, params);
  }

  // The next page, or the first (`first`: a reload). A page asked for before the list was reloaded
  // or trimmed no longer follows its last row, and is dropped (the pager answers null).
  async loadMore(first = false) {
    if (this.loading && !first) return this.loading;
    if (!first && !this.pager.hasMore && !this.canResume) return;
    const read = this.pager.next(first);
    this.canResume = false;
    this.root.classList.add("is-loading");
    const request = read
      .then((page) => {
        if (page) this.append(page.results, false);
      })
      .catch((err) => {
        this.tbody.insertAdjacentHTML("beforeend", `<tr class="error"><td colspan="8">${esc(err.message)}</td></tr>`);
      })
      .finally(() => {
        if (this.loading !== request) return;
        this.loading = null;
        this.root.classList.remove("is-loading");
        this.more.hidden = !this.pager.hasMore && !this.canResume;
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
    }
    this.filters.suggestFrom(fresh);
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
      <td class="num">${fmt(it.advantage, 3)}${splitTag(it, this.rules.split)}</td>
      <td class="num">${it.num_tokens}</td>
      <td><span class="finish finish-${esc(it.finish_reason)}">${esc(it.finish_reason)}</span></td>
      <td class="scores col-wide">${scores}</td>
      <td class="preview">${marks}${episodeSummary(it)}${esc(it.preview)}</td>
    </tr>`;
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
    this.count.textContent = `${this.items.length}${this.pager.hasMore || this.canResume ? "+" : ""} shown`;
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
    const params = this.filters.params();
    const fits = items.filter((it) => !this.ids.has(it.id) && this.filters.matches(it, params));
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
    this.pager.reset();
    const gone = this.items.splice(keep);
    for (const it of gone) {
      this.ids.delete(it.id);
      this.tbody.querySelector(`tr[data-rollout-id="${it.id}"]`)?.remove();
    }
    if (this.selected >= this.items.length) this.selected = -1;
    const stepMax = this.rules.bounds.find((b) => b.field === "step" && b.bound === "max").param;
    const last = this.items[this.items.length - 1];
    const asked = this.filters.params()[stepMax];
    this.resumeParams = { [stepMax]: asked === undefined ? last.step : Math.min(Number(asked), last.step) };
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
    const params = { ...this.filters.params(), limit: LIVE_ROWS_MAX };
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

  select(index, open) {
    if (index < 0) return;
    this.selected = index;
    for (const row of this.tbody.querySelectorAll("tr.selected")) row.classList.remove("selected");
    const row = this.tbody.querySelector(`tr[data-rollout-id="${this.items[index].id}"]`);
    if (row) {
      row.classList.add("selected");
      row.scrollIntoView({ block: "nearest" });
    }
    if (open) this.detail.open(this.items[index].id);
  }

  // After the detail closes, the keyboard goes on from the row it showed.
  focusSelected() {
    this.tbody.querySelector("tr.selected")?.focus?.();
  }
}
