// A run's ETA from measured step times: the median of the last few steps' times × steps left.
//
// A step's time is measured two ways: the wall time between two steps' metric events (what the
// run really takes per step, reporting and checkpoints included) and the trainer's own
// `timing/step_s`. The first needs two steps seen live; until then the trainer's numbers stand in
// (they also come with the curves of a run opened midway). The first step also loads the model
// and warms up, so its time counts only while it is the only one measured; before any step is
// measured there is no ETA, rather than a guess.

const RECENT = 5; // steps whose median is taken: one slow step (a checkpoint) does not swing it

export function median(values) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export class StepClock {
  constructor() {
    this.started = null; // epoch seconds the run started, once it has
    this.marks = []; // [step, epoch seconds of its metrics event], steps increasing
    this.trainer = []; // [step, the trainer's timing/step_s]
  }

  // A metrics event: its step, its time (epoch seconds) and the trainer's step time if it sent one.
  seen(step, time, stepSeconds) {
    const last = this.marks[this.marks.length - 1];
    if (!last || step > last[0]) this.marks.push([step, time]);
    if (this.marks.length > RECENT + 1) this.marks.shift();
    if (Number.isFinite(stepSeconds)) this.keepTrainer([[step, stepSeconds]]);
  }

  // The trainer's step times of the latest steps, from the curves loaded with the page: [step, s].
  seed(points) {
    this.keepTrainer(points.filter(([, s]) => Number.isFinite(s)));
  }

  keepTrainer(points) {
    const known = new Set(this.trainer.map(([step]) => step));
    this.trainer.push(...points.filter(([step]) => !known.has(step)));
    this.trainer.sort((a, b) => a[0] - b[0]);
    this.trainer.splice(0, Math.max(0, this.trainer.length - RECENT - 1));
  }

  // Seconds per step, or null while no step has a measured time.
  perStep() {
    const between = [];
    for (let i = 1; i < this.marks.length; i++) {
      const [step, time] = this.marks[i];
      const [prevStep, prevTime] = this.marks[i - 1];
      between.push((time - prevTime) / (step - prevStep));
    }
    if (between.length) return median(between.slice(-RECENT));
    const later = this.trainer.filter(([step]) => step > 1);
    const trainer = (later.length ? later : this.trainer).map(([, s]) => s);
    if (trainer.length) return median(trainer.slice(-RECENT));
    const [first] = this.marks;
    if (first && first[0] === 1 && this.started !== null) return first[1] - this.started;
    return null;
  }

  // Seconds until `total` steps, from `step`; null while no step has a measured time.
  eta(step, total) {
    const perStep = this.perStep();
    return perStep === null ? null : Math.max(0, (total - step) * perStep);
  }
}
