// SQL console: Enter or Ctrl/⌘+Enter runs the query; Shift+Enter inserts a new line.
document.addEventListener('keydown', function (e) {
  if (e.key !== 'Enter' || e.shiftKey || !e.target || e.target.id !== 'sql-input') { return; }
  e.preventDefault();
  const run = document.getElementById('sql-run');
  if (run) { run.click(); }
});
