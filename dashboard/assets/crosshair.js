// Run overview: a step-synced crosshair. Hovering step N on one panel draws a vertical line at N on every drawn
// panel and on the phase timeline, with a dot where each hoverable series crosses it (the hovered panel keeps
// plotly's own label with the values). Drawn as elements laid over the plots, not as figure shapes: it costs the
// figure (and the server) nothing, a live Patch never has to carry it, and it is redrawn after every plot
// (plotly_afterplot), so a live update or a zoom moves it with the axes.
(function () {
  const LINE = 'cw-xline', DOT = 'cw-xdot';

  function axisName(id) { return id.charAt(0) + 'axis' + id.slice(1); }  // 'x2' → 'xaxis2'

  function layer(gd) {
    let el = gd.querySelector(':scope > .cw-crosshair');
    if (!el) {
      el = document.createElement('div');
      el.className = 'cw-crosshair';
      gd.appendChild(el);
    }
    return el;
  }

  function nearest(xs, x) {  // index of the point of a step-sorted series nearest to x (-1: none)
    let lo = 0, hi = xs.length - 1;
    if (hi < 0) { return -1; }
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (xs[mid] <= x) { lo = mid; } else { hi = mid; }
    }
    return Math.abs(xs[hi] - x) < Math.abs(xs[lo] - x) ? hi : lo;
  }

  function place(el, cls, left, top, width, height, attrs) {
    const d = document.createElement('div');
    d.className = cls;
    d.style.cssText = 'left:' + left + 'px;top:' + top + 'px;width:' + width + 'px;height:' + height + 'px';
    Object.entries(attrs).forEach(([k, v]) => d.setAttribute(k, v));
    el.appendChild(d);
    return d;
  }

  function dots(gd, el, step) {
    const fl = gd._fullLayout;
    (gd._fullData || []).forEach(function (t) {
      if (t.visible !== true || t.hoverinfo === 'skip' || t.mode === 'markers' || !t.x || t.x.length === 0) { return; }
      const xa = fl[axisName(t.xaxis)], ya = fl[axisName(t.yaxis)];
      if (!xa || !ya || ya.visible === false) { return; }
      const i = nearest(t.x, step), n = t.x.length;
      // a downsampled series may not hold step N itself: its nearest point, if within one average spacing
      const spacing = n > 1 ? (t.x[n - 1] - t.x[0]) / (n - 1) : 0;
      if (i < 0 || Math.abs(t.x[i] - step) > Math.max(0.5, spacing) || t.y[i] === null || !isFinite(t.y[i])) {
        return;
      }
      const px = xa._offset + xa.c2p(t.x[i]), py = ya._offset + ya.c2p(t.y[i]);
      if (!isFinite(py) || py < ya._offset - 1 || py > ya._offset + ya._length + 1) { return; }
      const d = place(el, DOT, px - 3, py - 3, 6, 6, {'data-trace': t.index, 'data-x': t.x[i], 'data-y': t.y[i]});
      d.style.background = (t.line && t.line.color) || '#ccc';
    });
  }

  // the line at `step` on every drawn subplot of `gd` (and a dot per series when `withDots`); returns the count
  function draw(gd, step, withDots) {
    const fl = gd && gd._fullLayout;
    if (!fl || !fl._subplots) { return 0; }
    const el = layer(gd);
    el.replaceChildren();
    if (step === null || step === undefined) { return 0; }
    let n = 0;
    (fl._subplots.cartesian || []).forEach(function (id) {
      const m = /^(x\d*)(y\d*)$/.exec(id);
      const xa = m && fl[axisName(m[1])], ya = m && fl[axisName(m[2])];
      if (!xa || !ya || ya.visible === false || ya.overlaying) { return; }
      const px = xa._offset + xa.c2p(step);
      if (!(px >= xa._offset - 0.5 && px <= xa._offset + xa._length + 0.5)) { return; }
      place(el, LINE, px, ya._offset, 1, ya._length, {'data-step': step, 'data-subplot': id});
      n += 1;
    });
    if (withDots) { dots(gd, el, step); }
    return n;
  }

  function graph(id) { return document.querySelector('#' + id + ' .js-plotly-plot'); }

  function hook(gd, withDots) {  // redraw after every plot: a live Patch, a zoom, a resize
    if (gd && !gd._cwCrosshair && gd.on) {
      gd._cwCrosshair = true;
      gd.on('plotly_afterplot', function () { draw(gd, gd._cwStep, withDots); });
    }
  }

  window.dash_clientside = Object.assign({}, window.dash_clientside);
  window.dash_clientside.collapsewatch = Object.assign({}, window.dash_clientside.collapsewatch, {
    // clientside callback: the overview's hoverData (null on unhover) → the step drawn on every panel
    crosshair: function (hover, graphId, timelineId) {
      const gd = graph(graphId), tl = graph(timelineId);
      const pt = hover && hover.points && hover.points[0];
      const step = pt && typeof pt.x === 'number' ? Math.round(pt.x) : null;
      [[gd, true], [tl, false]].forEach(function ([g, withDots]) {
        if (!g) { return; }
        hook(g, withDots);
        g._cwStep = step;
        draw(g, step, withDots);
      });
      return step;
    },
  });
})();
