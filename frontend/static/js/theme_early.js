// Apply a stored theme before first paint (loaded without defer in <head>; theme.js keeps it in
// sync afterwards). A file, not an inline script: the Content-Security-Policy runs only the studio's files.
try {
  const t = localStorage.getItem("studio-theme");
  if (t) document.documentElement.dataset.theme = t;
} catch (_) {}
