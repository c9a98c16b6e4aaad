// Share links panel (run owners): create a read-only link for someone outside the team,
// copy it, revoke it. A revoked link stops working at once, open websockets included.

import { esc } from "./api.js";

export class SharePanel {
  constructor(root, { api, runId }) {
    this.root = root;
    this.api = api;
    this.runId = runId;
    this.list = root.querySelector("[data-share-list]");
    root.querySelector("[data-share-create]").addEventListener("click", () => this.create());
    this.list.addEventListener("click", (ev) => this.onClick(ev));
  }

  async load() {
    const resp = await this.api.get(`/api/runs/${this.runId}/share-links/`);
    this.render(resp.results);
  }

  async create() {
    const label = this.root.querySelector("[name=share_label]").value.trim();
    await this.api.post(`/api/runs/${this.runId}/share-links/`, { label });
    this.root.querySelector("[name=share_label]").value = "";
    await this.load();
  }

  async onClick(ev) {
    const copy = ev.target.closest("[data-copy]");
    if (copy) {
      const input = copy.parentElement.querySelector("input");
      input.select();
      try {
        await navigator.clipboard.writeText(input.value);
        copy.textContent = "Copied";
      } catch (_) {
        document.execCommand("copy");
      }
      return;
    }
    const revoke = ev.target.closest("[data-revoke]");
    if (revoke && window.confirm("Revoke this link? Anyone using it loses access immediately.")) {
      await this.api.post(`/api/share-links/${revoke.dataset.revoke}/revoke/`, {});
      await this.load();
    }
  }

  render(links) {
    this.list.innerHTML = links.length
      ? links
          .map(
            (l) => `<li class="${l.revoked ? "revoked" : ""}" data-share-id="${l.id}">
        <div class="share-meta"><b>${esc(l.label || "link")}</b>
          <span class="muted">by ${esc(l.created_by)}${l.revoked ? " · revoked" : ""}</span></div>
        ${
          l.revoked
            ? ""
            : `<div class="share-url"><input readonly value="${esc(new URL(l.url, window.location.origin))}">
          <button type="button" data-copy>Copy</button>
          <button type="button" class="danger" data-revoke="${l.id}">Revoke</button></div>`
        }</li>`,
          )
          .join("")
      : '<li class="muted">No share links.</li>';
  }
}
