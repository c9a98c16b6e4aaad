// The experiment form page: its rules come from the server (the experiment-form-rules JSON block).
import { initExperimentForm } from "./experiment_form.js";

initExperimentForm(
  document.querySelector("[data-experiment-form]"),
  JSON.parse(document.getElementById("experiment-form-rules").textContent),
);
