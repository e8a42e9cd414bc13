// usage-chart.js draws the Usage page's "spend per day" table as a stacked bar chart with the
// vendored uPlot (static/uplot). The table stays the source of the numbers and stays on the
// page (for screen readers and without JavaScript); the chart is hidden from assistive
// technology. Each column th[data-series] is a group (model or key); each row is a day
// (time[datetime]) whose cells carry the exact amount in micro-units (data-micros).
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
    var when = tr.querySelector("time").getAttribute("datetime");
    days.push(Date.parse(when + "T00:00:00Z") / 1000);
    tr.querySelectorAll("td[data-micros]").forEach(function (td, i) {
      raw[i].push(Number(td.dataset.micros) / 1e6);
    });
  });
  // Stacked: series i is the sum of groups 0..i, drawn from the tallest down so that each
  // group's band shows; the legend shows each group's own amount.
  var stacked = [];
  var running = days.map(function () { return 0; });
  raw.forEach(function (values) {
    running = running.map(function (sum, d) { return sum + values[d]; });
    stacked.push(running.slice());
  });
  var palette = ["#0b5cad", "#d9822b", "#2e8540", "#a11", "#6f42c1", "#17a2b8", "#8c6d1f", "#777"];
  var series = [{}];
  var data = [days];
  for (var i = names.length - 1; i >= 0; i--) {
    (function (i) {
      series.push({
        label: names[i],
        fill: palette[i % palette.length],
        stroke: palette[i % palette.length],
        paths: uPlot.paths.bars({ size: [0.7, 40] }),
        points: { show: false },
        value: function (u, v, s, idx) { return idx == null ? "\u2014" : "$" + raw[i][idx].toFixed(4); },
      });
      data.push(stacked[i]);
    })(i);
  }
  var width = Math.max(320, Math.min(target.clientWidth || 800, 1100));
  new uPlot({
    width: width,
    height: 280,
    series: series,
    // Half a day of room on either side, so that the first and last bars are whole.
    scales: { x: { time: true, range: function (u, min, max) { return [min - 43200, max + 43200]; } } },
    axes: [{}, { values: function (u, ticks) { return ticks.map(function (t) { return "$" + t; }); } }],
    cursor: { drag: { x: false, y: false } },
  }, data, target);
})();
