// The grids' own functions (dash-ag-grid calls a column's {"function": "runAge(params.value)"} with these in scope).
window.dashAgGridFunctions = Object.assign({}, window.dashAgGridFunctions, {
  // '12 s ago', '4 min ago', '3 h ago', '2 d ago' for a time in milliseconds since the epoch ('' when missing),
  // by this browser's clock: a run's row is not sent again only because it aged
  runAge: function (ms, now) {
    if (ms === null || ms === undefined) { return ''; }
    var secs = Math.max(0, ((now === undefined ? Date.now() : now) - ms) / 1000);
    var units = [['d', 86400], ['h', 3600], ['min', 60]];
    for (var i = 0; i < units.length; i++) {
      if (secs >= units[i][1]) { return Math.floor(secs / units[i][1]) + ' ' + units[i][0] + ' ago'; }
    }
    return Math.floor(secs) + ' s ago';
  }
});
