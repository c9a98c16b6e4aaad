// Plain forms: a <select data-refresh-on-change> (a criterion's or an environment's kind) submits
// its form's "refresh" button when it changes, so the server renders that kind's fields. Instead
// of an inline onchange handler, which the Content-Security-Policy does not run. A refresh saves
// nothing, so it does not wait for the rest of the form to be valid (an empty Name, say): the
// browser's checks are skipped (formnovalidate), as the server's are until the user saves.
document.addEventListener("change", (event) => {
  const field = event.target.closest("[data-refresh-on-change]");
  const refresh = field && field.form && field.form.querySelector('[name="action"][value="refresh"]');
  if (!refresh) return;
  refresh.formNoValidate = true;
  refresh.click();
});
