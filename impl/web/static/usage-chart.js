// usage-chart.js draws the Usage page's "spend per day" table as a stacked bar chart with the
// vendored uPlot (static/uplot). The table stays the source of the numbers and stays on the
// page (for screen readers and without JavaScript); the chart is hidden from assistive
// technology. Each column th[data-series] is a group (model or key); each row is a day
// (time[datetime]) whose cells carry the exact amount in micro-units (data-micros), or a run of
// days without spend (data-empty-days, from its first time[datetime]), drawn as that many days
// of nothing.
(function () {
  "use strict";
  var table = document.querySelector("table[data-chart]");
  if (!table || typeof uPlot === "undefined") {
    return;
  }
  var target = document.getElementById(table.dataset.chart);
  var names = Array.prototype.map.call(table.querySelectorAll("thead th[data-series]"), function (th) {
    return th.textContent;
  });
  var rows = table.querySelectorAll("tbody tr");
  if (!target || names.length === 0 || rows.length === 0) {
    return;
  }
  var days = [];
  var raw = names.map(function () { return []; });
  rows.forEach(function (tr) {
    var first = Date.parse(tr.querySelector("time").getAttribute("datetime") + "T00:00:00Z") / 1000;
    var empty = Number(tr.dataset.emptyDays || 0);
    if (empty > 0) {
      for (var d = 0; d < empty; d++) {
        days.push(first + d * 86400);
        raw.forEach(function (values) { values.push(0); });
      }
      return;
    }
    days.push(first);
    tr.querySelectorAll("td[data-micros]").forEach(function (td, i) {
      raw[i].push(Number(td.dataset.micros) / 1e6);
    });
  });
  // Stacked: series i is the sum of groups 0..i, drawn from the tallest down so that each
  // group's band shows; the legend shows each group's own amount. A group that spent nothing
  // on a day has no band that day (null), rather than a flat line at the top of the others.
  var stacked = [];
  var running = days.map(function () { return 0; });
  raw.forEach(function (values) {
    running = running.map(function (sum, d) { return sum + values[d]; });
    stacked.push(running.map(function (sum, d) { return values[d] > 0 ? sum : null; }));
  });
  var top = running.reduce(function (a, b) { return Math.max(a, b); }, 0);

  // Days are UTC midnights (seconds); labels are the UTC date, "MM-DD" on the axis and
  // "YYYY-MM-DD" in the legend, whatever the browser's time zone.
  function isoDay(t) { return new Date(t * 1000).toISOString().slice(0, 10); }
  // Dollars with as many decimals as the step between ticks needs (at least two): "$0",
  // "$0.004", "$0.0015", "$1.50", "$20.00".
  function dollars(ticks) {
    var step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : Math.abs(ticks[0] || 1);
    var decimals = step > 0 ? Math.min(6, Math.max(2, Math.ceil(-Math.log10(step) - 1e-9))) : 2;
    return ticks.map(function (t) { return t === 0 ? "$0" : "$" + t.toFixed(decimals); });
  }

  // An amount as the page writes it (impl/web/money.go): to the cent, "< $0.01" under a cent.
  function cents(dollars) {
    if (dollars > 0 && dollars < 0.01) {
      return "< $0.01";
    }
    return "$" + dollars.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  }

  var palette = ["#0b5cad", "#d9822b", "#2e8540", "#a11", "#6f42c1", "#17a2b8", "#8c6d1f", "#777"];
  var series = [{ label: "Day", value: function (u, v) { return v == null ? "\u2014" : isoDay(v); } }];
  var data = [days];
  for (var i = names.length - 1; i >= 0; i--) {
    (function (i) {
      series.push({
        label: names[i],
        fill: palette[i % palette.length],
        stroke: palette[i % palette.length],
        paths: uPlot.paths.bars({ size: [0.7, 40], align: 0 }),
        points: { show: false },
        value: function (u, v, s, idx) { return idx == null ? "\u2014" : cents(raw[i][idx]); },
      });
      data.push(stacked[i]);
    })(i);
  }
  var width = Math.max(320, Math.min(target.clientWidth || 800, 1100));
  // One tick a day, on the day's bar; with more days than fit (about 44 px a label) every
  // second, third... day, counted back from the last so that today is always labelled.
  function daySplits(u) {
    var every = Math.max(1, Math.ceil(days.length * 44 / Math.max(u.bbox.width / (window.devicePixelRatio || 1), 1)));
    return days.filter(function (d, i) { return (days.length - 1 - i) % every === 0; });
  }
  var font = "12px system-ui, sans-serif";
  new uPlot({
    width: width,
    height: 280,
    series: series,
    scales: {
      // Not a time scale: the ticks and labels are the days themselves (UTC), and half a day
      // of room on either side keeps the first and last bars whole.
      x: { time: false, range: function (u, min, max) { return [min - 43200, max + 43200]; } },
      // From $0 to a tenth above the tallest day ($1 when nothing was spent).
      y: { range: function () { return [0, top > 0 ? top * 1.1 : 1]; } },
    },
    axes: [
      { splits: daySplits, values: function (u, ticks) { return ticks.map(function (t) { return isoDay(t).slice(5); }); },
        font: font, grid: { show: false } },
      { values: function (u, ticks) { return dollars(ticks); }, font: font,
        // Wide enough for the longest label ("$0.0015" and the like).
        size: function (u, values) {
          var longest = (values || []).reduce(function (n, s) { return Math.max(n, String(s).length); }, 4);
          return 16 + longest * 8;
        } },
    ],
    cursor: { drag: { x: false, y: false } },
  }, data, target);
})();
