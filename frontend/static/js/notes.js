// Notes on a run and on its rollouts: the run page's notes panel (filter by tag or text,
// click a rollout note to open that rollout) and the notes block in the rollout detail.
// A teammate's note arrives live: the websocket's `notes` hint makes the page re-read them.

import { esc } from "./api.js";

function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "" : d.toLocaleString([], { dateStyle: "short", timeStyle: "short" });
}

export class NotesClient {
  constructor(panel, { api, runId, canNote, onOpenRollout = () => {}, onChange = () => {} }) {
    this.panel = panel;
    this.api = api;
    this.runId = runId;
    this.canNote = canNote;
    this.onOpenRollout = onOpenRollout;
    this.onChange = onChange; // called after notes load or change, so the inspector can mark rows
    this.notes = [];
    this.rolloutId = null; // the rollout whose detail shows a notes block
    this.refreshTimer = null;
    this.filter = { tag: "", q: "" };
    this.list = panel.querySelector("[data-notes-list]");
    this.tags = panel.querySelector("[data-note-tags]");
    this.bindPanel();
  }

  bindPanel() {
    const search = this.panel.querySelector("[data-notes-search]");
    search?.addEventListener("input", () => {
      this.filter.q = search.value.trim().toLowerCase();
      this.render();
    });
    this.tags?.addEventListener("click", (ev) => {
      const chip = ev.target.closest("[data-filter-tag]");
      if (!chip) return;
      this.filter.tag = this.filter.tag === chip.dataset.filterTag ? "" : chip.dataset.filterTag;
      this.render();
    });
    this.list.addEventListener("click", (ev) => this.onListClick(ev));
    const form = this.panel.querySelector("[data-note-form]");
    if (form) this.bindForm(form, null);
  }

  bindForm(form, rolloutId) {
    form.addEventListener("click", (ev) => {
      const quick = ev.target.closest("[data-tag]");
      if (quick) form.elements.tag.value = quick.dataset.tag;
    });
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const text = form.elements.text.value.trim();
      const tag = form.elements.tag.value.trim();
      if (!text && !tag) return;
      const body = { text: text || tag, tag };
      if (rolloutId !== null) body.rollout = rolloutId;
      const button = form.querySelector("button[type=submit]");
      button.disabled = true;
      try {
        const note = await this.api.post(`/api/runs/${this.runId}/notes/`, body);
        this.notes.unshift(note);
        form.reset();
        this.render();
        if (rolloutId !== null) this.renderRollout(rolloutId);
      } catch (err) {
        form.insertAdjacentHTML("beforeend", `<p class="error">${esc(err.message)}</p>`);
      } finally {
        button.disabled = false;
      }
    });
  }

  async onListClick(ev) {
    const del = ev.target.closest("[data-delete-note]");
    if (del) {
      await this.api.del(`/api/notes/${del.dataset.deleteNote}/`);
      this.notes = this.notes.filter((n) => String(n.id) !== del.dataset.deleteNote);
      this.render();
      return;
    }
    const link = ev.target.closest("[data-rollout-link]");
    if (link) this.onOpenRollout(Number(link.dataset.rolloutLink));
  }

  async load() {
    const resp = await this.api.get(`/api/runs/${this.runId}/notes/`);
    this.notes = resp.results;
    this.render();
    if (this.rolloutId !== null) this.renderRollout(this.rolloutId);
  }

  // Re-read the notes soon: a burst of hints (a replay after reconnecting) makes one request.
  refresh() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.load().catch((err) => console.error(err)), 200);
  }

  visible() {
    const { tag, q } = this.filter;
    return this.notes.filter(
      (n) => (!tag || n.tag === tag) && (!q || `${n.text} ${n.tag} ${n.author}`.toLowerCase().includes(q)),
    );
  }

  noteHtml(n, withRolloutLink) {
    const target =
      withRolloutLink && n.rollout
        ? `<button type="button" class="link" data-rollout-link="${n.rollout}">rollout ${n.rollout} · step ${n.rollout_step}</button>`
        : withRolloutLink
          ? '<span class="muted">run</span>'
          : "";
    return `<li class="note" data-note-id="${n.id}">
      <div class="note-meta">${n.tag ? `<span class="tag">${esc(n.tag)}</span>` : ""}${target}
        <span class="muted">${esc(n.author)} · ${when(n.created)}</span>
        ${n.can_delete ? `<button type="button" class="icon small" data-delete-note="${n.id}" title="Delete note">✕</button>` : ""}</div>
      <p>${esc(n.text)}</p></li>`;
  }

  forRollout(rolloutId) {
    return this.notes.filter((n) => n.rollout === rolloutId);
  }

  render() {
    this.onChange();
    const tags = [...new Set(this.notes.map((n) => n.tag).filter(Boolean))].sort();
    if (this.tags) {
      this.tags.innerHTML = tags
        .map((t) => `<button type="button" class="chip ${t === this.filter.tag ? "active" : ""}" data-filter-tag="${esc(t)}">${esc(t)}</button>`)
        .join("");
    }
    const shown = this.visible();
    this.list.innerHTML = shown.length
      ? `<ul class="notes">${shown.map((n) => this.noteHtml(n, true)).join("")}</ul>`
      : `<p class="muted">${this.notes.length ? "No note matches." : "No notes yet."}</p>`;
    const count = this.panel.querySelector("[data-notes-count]");
    if (count) count.textContent = String(this.notes.length);
  }

  // The notes block inside a rollout's detail view.
  attachRollout(section, rolloutId) {
    this.rolloutSection = section;
    this.rolloutId = rolloutId;
    const form = section.querySelector("[data-note-form]");
    if (form) this.bindForm(form, rolloutId);
    section.querySelector("[data-notes-list]").addEventListener("click", (ev) => this.onListClick(ev).then(() => this.renderRollout(rolloutId)));
    this.renderRollout(rolloutId);
  }

  renderRollout(rolloutId) {
    const section = this.rolloutSection;
    if (!section || !section.isConnected) return;
    const mine = this.notes.filter((n) => n.rollout === rolloutId);
    section.querySelector("[data-notes-list]").innerHTML = mine.length
      ? `<ul class="notes">${mine.map((n) => this.noteHtml(n, false)).join("")}</ul>`
      : '<p class="muted">No notes on this rollout.</p>';
  }
}
