// Marks a rollout shows both as a row of the rollout list and in the head of its detail: the
// reward's colour, its split or "untrained", the hinted badge. Kept in one place so that the row
// and the detail always mark a rollout alike.

import { esc } from "./api.js";

export function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

export function rewardClass(r) {
  if (r === null || r === undefined) return "";
  return r > 0 ? "pos" : r < 0 ? "neg" : "zero";
}

// A hinted retry of a prompt whose group all failed: its answer began with the start of the
// reference solution (the hint), which the model continued and was never trained on.
export function hintedBadge(it) {
  const share = it.hint_fraction != null ? ` ${Math.round(it.hint_fraction * 100)}%` : "";
  return `<span class="tag hinted" data-hinted title="hinted retry: the answer began with${share} of the reference solution">hinted${share}</span>`;
}

// A validation rollout (a held-out prompt sampled after the step) or an evaluation run's sample says so;
// a training rollout that was not trained on (dynamic sampling dropped its group, or the batch was full)
// says that. `split`: the server's split rules (rules.rollouts.split).
const SPLIT_TITLES = {
  validation: "sampled from a held-out prompt after this step; never trained on",
  eval: "sampled by an evaluation run; never trained on",
};

export function splitTag(it, split) {
  if ((it.split || split.default) !== split.default) {
    const title = SPLIT_TITLES[it.split] || "not a training rollout; never trained on";
    return ` <span class="tag split-${esc(it.split)}" title="${esc(title)}">${esc(it.split)}</span>`;
  }
  return it.trained === false ? ' <span class="tag untrained" title="not trained: its group was dropped by dynamic sampling or generated beyond the batch">untrained</span>' : "";
}
