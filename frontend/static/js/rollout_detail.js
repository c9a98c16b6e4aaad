// One rollout in full, beside the rollout list: prompt, completion, per-criterion scores, the
// other completions of the same group side by side, notes. A multi-turn episode reads as a
// conversation: each assistant turn, its tool calls (arguments, result or error), the observation
// that followed (not trained on), the turn's reward and advantage. Long texts come cut by the
// server and are read in full on demand.

import { esc, fmt, needRules } from "./api.js";
import { hintedBadge, plural, rewardClass, splitTag } from "./rollout_marks.js";

function renderText(value) {
  if (Array.isArray(value)) {
    return value
      .map((turn) => `<div class="turn role-${esc(turn.role)}"><span class="role">${esc(turn.role)}</span><pre>${esc(turn.content)}</pre></div>`)
      .join("");
  }
  return `<pre>${esc(value)}</pre>`;
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
// A tool result is shown once, in its call's box: the observation's tool message that carries the same text is
// not drawn again (issue 39: every tool result appeared twice).
function shownInCalls(turn) {
  const texts = (turn.tool_calls || []).map((c) => String(c.error ?? c.result ?? "").trim()).filter(Boolean);
  return (m) => m.role === "tool" && texts.some((text) => String(m.content ?? "").includes(text));
}

function turnHtml(turn, k) {
  const repeated = shownInCalls(turn);
  const messages = turn.observation || [];
  const observation = messages
    .filter((m) => !repeated(m))
    .map((m) => `<div class="obs-message"><span class="role">${esc(m.role)}</span><pre>${esc(m.content)}</pre></div>`);
  const above = messages.length > observation.length ? ` · the tool result${messages.length - observation.length > 1 ? "s" : ""} above` : "";
  return `<article class="turn role-assistant" data-turn="${k}">
    <header class="turn-head"><span class="role">assistant · turn ${k + 1}</span>
      <span class="stat" title="${esc(turn.reason || "")}">reward <b class="turn-reward reward ${rewardClass(turn.reward)}">${fmt(turn.reward, 3)}</b>${turn.reason ? ` <span class="turn-reason muted">(${esc(turn.reason)})</span>` : ""}</span>
      <span class="stat">advantage <b class="turn-advantage">${fmt(turn.advantage, 3)}</b></span>
      <span class="muted">${turn.num_tokens} tok · ${esc(turn.finish_reason)}${turn.answered ? " · answered" : ""}</span></header>
    <pre class="turn-text">${esc(turn.text)}</pre>
    ${(turn.tool_calls || []).map(toolCallHtml).join("")}
    ${messages.length ? `<div class="observation" title="Observation tokens: fed to the model, never trained on">
      <span class="obs-label">observation · ${plural(turn.observation_tokens, "token")} · not trained on${above}</span>${observation.join("")}</div>` : ""}
  </article>`;
}

// Which policy versions sampled the completion (an asynchronous run: generation ran ahead of training),
// from `policy_versions` ([[version, tokens], ...] in token order: several when a partial rollout went on
// with newer weights) and `staleness` (versions between its oldest token's weights and those the step
// trained from). "" for a rollout that recorded none (a synchronous run's, an evaluation's).
export function versionsHtml(r) {
  const spans = Array.isArray(r.policy_versions) ? r.policy_versions : [];
  if (!spans.length && r.staleness == null) return "";
  const parts = spans.map(([version, tokens]) => `${version} (${plural(tokens, "token")})`);
  const sampled = parts.length
    ? `sampled by policy version${parts.length > 1 ? "s" : ""} <b data-field="policy_versions">${esc(parts.join(", "))}</b>`
    : "";
  const stale = r.staleness == null
    ? ""
    : r.staleness === 0
      ? `<b data-field="staleness">on-policy</b>`
      : `<b data-field="staleness" class="stale">${plural(r.staleness, "version")} stale</b>`;
  const title = "Policy version: the optimiser updates applied to the weights that sampled these tokens. Staleness: "
    + "how many versions the oldest token's weights were behind those this step trained from.";
  return `<span class="stat versions" title="${esc(title)}">${[sampled, stale].filter(Boolean).join("; ")}</span>`;
}

// On-policy distillation: each completion token shaded by the teacher's disagreement, the per-token reverse KL
// log p_student - log p_teacher on the sampled token (warm: the student was surer of it than the teacher;
// cool: the teacher would have picked it more often). Levels by |KL| in nats; null: no teacher scored it.
const KL_LEVELS = [0.1, 0.5, 1, 2];

export function teacherTokensHtml(tokens) {
  if (!Array.isArray(tokens) || !tokens.length) return "";
  const scored = tokens.filter(([, kl]) => typeof kl === "number");
  const mean = scored.length ? scored.reduce((sum, [, kl]) => sum + kl, 0) / scored.length : 0;
  const spans = tokens.map(([piece, kl]) => {
    if (typeof kl !== "number") return `<span class="tkl tkl-none" title="not scored by a teacher">${esc(piece)}</span>`;
    const level = KL_LEVELS.filter((edge) => Math.abs(kl) >= edge).length;
    const side = kl >= 0 ? "p" : "n";
    return `<span class="tkl tkl-${side}${level}" data-kl="${kl}" title="reverse KL ${fmt(kl, 4)}">${esc(piece)}</span>`;
  });
  return `<section class="teacher-tokens"><h4>Teacher disagreement</h4>
    <p class="muted">Per token: log p<sub>student</sub> − log p<sub>teacher</sub> of the sampled token (hover for the value);
      warm: the student was surer than the teacher, cool: the teacher liked it more. Mean ${fmt(mean, 4)} over ${plural(scored.length, "token")}.</p>
    <div class="textblock"><pre class="tkl-text">${spans.join("")}</pre></div></section>`;
}

function renderEpisode(turns) {
  return turns.map(turnHtml).join("");
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

export class RolloutDetail {
  /**
   * @param root      the inspector's element: it holds the detail (.rollout-detail) and is marked "has-detail" while one is open
   * @param rules     the server's rules (readRules()): its `rollouts` split, its `notes` limits
   * @param notes     NotesClient used for the rollout's notes (may be null on read-only pages)
   * @param onClose   called after the detail closes (the list puts the focus back on its selected row)
   */
  constructor(root, { api, runId, rules, notes = null, canNote = false, onClose = () => {} }) {
    this.split = needRules(rules, "rollouts", "RolloutDetail").split;
    this.noteRules = needRules(rules, "notes", "RolloutDetail");
    this.root = root;
    this.api = api;
    this.runId = runId;
    this.notes = notes;
    this.canNote = canNote;
    this.onClose = onClose;
    this.el = root.querySelector(".rollout-detail");
    this.openId = null; // the rollout shown or loading; null while closed
    this.el.addEventListener("click", (ev) => {
      if (ev.target.closest("[data-close]")) this.close();
      const showAll = ev.target.closest("[data-show-all]");
      if (showAll) this.showAll(showAll);
      const sibling = ev.target.closest("[data-open-rollout]");
      if (sibling) this.open(Number(sibling.dataset.openRollout));
    });
  }

  get isOpen() {
    return this.openId !== null;
  }

  async open(rolloutId) {
    this.openId = rolloutId;
    this.root.classList.add("has-detail");
    this.el.hidden = false;
    // Bring list and detail into view together when the inspector sits below the charts.
    const top = this.root.getBoundingClientRect().top;
    if (top < 0 || top > window.innerHeight * 0.4) this.root.scrollIntoView({ block: "start" });
    this.el.innerHTML = `<div class="detail-loading">Loading rollout ${rolloutId}…</div>`;
    let r;
    try {
      r = await this.api.get(`/api/runs/${this.runId}/rollouts/${rolloutId}/`);
    } catch (err) {
      this.el.innerHTML = `<div class="error">${esc(err.message)}</div>`;
      return;
    }
    if (this.openId !== rolloutId) return; // the user moved on while it loaded
    this.render(r);
  }

  close() {
    this.openId = null;
    this.el.hidden = true;
    this.root.classList.remove("has-detail");
    this.onClose();
  }

  render(r) {
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
            <span class="muted">adv ${fmt(g.advantage, 3)} · ${g.num_tokens} tok · ${esc(g.finish_reason)}${g.staleness ? ` · ${g.staleness} stale` : ""}</span></header>
          ${renderText(g.completion ?? g.preview)}
          ${g.truncated?.completion ? `<span class="muted">… ${chars(g.truncated.completion)} in all: open it to read them</span>` : ""}
        </article>`,
      )
      .join("");
    this.el.innerHTML = `
      <header class="detail-head">
        <div>
          <h3>Step ${r.step}${splitTag(r, this.split)} · <span class="mono">${esc(r.prompt_id)}</span> · sample ${r.sample_index}${group.length ? ` of ${group.length}` : ""}</h3>
          <div class="stats">
            <span class="stat">reward <b class="reward ${rewardClass(r.reward)}" data-field="reward">${fmt(r.reward, 4)}</b></span>
            <span class="stat">advantage <b>${fmt(r.advantage, 4)}</b></span>
            <span class="stat">length <b>${r.num_tokens}</b> tokens</span>
            <span class="stat">finish <b class="finish finish-${esc(r.finish_reason)}">${esc(r.finish_reason)}</b></span>
            ${r.hinted ? hintedBadge(r) : ""}
            ${versionsHtml(r)}
            ${r.turns ? `<span class="stat">${plural(r.num_turns, "turn")} · ${plural(r.tool_calls, "tool call")}${r.tool_errors ? ` · <b class="error">${plural(r.tool_errors, "tool error")}</b>` : ""} · ended <b data-field="end_reason">${esc(r.end_reason)}</b></span>` : ""}
          </div>
        </div>
        <button type="button" class="icon" data-close title="Close (Esc)">✕</button>
      </header>
      <section><h4>Prompt</h4><div class="textblock prompt" data-full="prompt">${renderText(r.prompt)}</div>${this.showAllButton(r, "prompt")}</section>
      ${r.turns
        ? `<section><h4>Episode</h4><div class="textblock completion episode" data-full="turns">${renderEpisode(r.turns)}</div>${this.showAllButton(r, "turns")}</section>`
        : `<section><h4>Completion</h4><div class="textblock completion">${r.hinted ? hintHtml(r, this.showAllButton(r, "hint")) : ""}<div data-full="completion">${renderText(r.completion)}</div></div>${this.showAllButton(r, "completion")}</section>`}
      ${teacherTokensHtml(r.teacher_tokens)}
      <section><h4>Criteria</h4><table class="criteria">${criteria || '<tr><td class="muted">no criterion scores</td></tr>'}</table></section>
      ${group.length > 1 ? `<section><h4>Group: ${group.length} completions of this prompt</h4><div class="siblings">${siblings}</div></section>` : ""}
      <section class="rollout-notes"><h4>Notes</h4><div data-notes-list></div>${this.canNote ? this.noteForm() : ""}</section>`;
    if (this.notes) this.notes.attachRollout(this.el.querySelector(".rollout-notes"), r.id);
    const current = this.el.querySelector(".sibling.current");
    const strip = this.el.querySelector(".siblings");
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
