/* contextledger session page: the timeline chart (uPlot), its filters and zoom, the listings
   packed into a self-contained file, and following a running agent.

   Safe by construction: the chart's data is read from a JSON block; ledger text reaches the
   document only through textContent, or as nodes of the server's own (escaped) markup; no
   string is ever parsed as script or assigned as markup.

   One file, one closure: the chart, the filters, the packed listings and the live updates
   share the chart's data and the filters' state, and the page loads it with one request. */
(function () {
  "use strict";

  var figure = document.getElementById("timeline");
  if (!figure || typeof uPlot === "undefined") return;

  var $ = function (selector, root) { return (root || document).querySelector(selector); };
  var $$ = function (selector, root) { return Array.prototype.slice.call((root || document).querySelectorAll(selector)); };
  // Elements by a data attribute's value, compared as strings: ledger ids never go into a selector.
  var byData = function (attribute, value, root) {
    var key = attribute.replace(/-([a-z])/g, function (m, c) { return c.toUpperCase(); });
    return $$("[data-" + attribute + "]", root).filter(function (el) { return el.dataset[key] === value; })[0] || null;
  };
  var standalone = figure.dataset.standalone === "1";
  var data = JSON.parse(document.getElementById("chart-data").textContent);
  var styles = getComputedStyle(document.documentElement);
  var cssVar = function (name, fallback) { return styles.getPropertyValue("--" + name).trim() || fallback; };
  var agentColor = function (i) { return cssVar("agent-" + (i % 4), "#33405a"); };
  var triggerColor = function (name) { return cssVar(name, "#6b7385"); };
  var dpr = window.devicePixelRatio || 1;
  var GROUP_PX = 16;      // markers closer than this (CSS pixels) are drawn as one
  var pinPath = new Path2D(data.pin);
  var card = document.getElementById("chart");  // holds the filters; never swapped, so it keeps the listeners

  // -- filters -----------------------------------------------------------------------------

  function checked(name) {
    var all = $$("input[name='" + name + "']", document.getElementById("filters"));
    var on = all.filter(function (i) { return i.checked; }).map(function (i) { return i.value; });
    var off = all.filter(function (i) { return !i.checked; }).map(function (i) { return i.value; });
    return { all: all.length, on: new Set(on), off: new Set(off), every: off.length === 0 };
  }
  var filters = {};
  function readFilters() {
    filters.triggers = checked("trigger");
    filters.strategies = checked("strategy");
    filters.agents = checked("agent_filter");
    var unit = $("input[name='unit']:checked", document.getElementById("filters"));
    filters.unit = unit ? unit.value : "tokens";
  }
  readFilters();
  // What a box leaves unchecked is hidden; a kind that came after the page was drawn is shown.
  var agentShown = function (id) { return !filters.agents.off.has(id); };
  var triggerShown = function (i) { return !filters.triggers.off.has(data.triggers[i]); };
  var strategyShown = function (i) { return !filters.strategies.off.has(data.strategies[i]); };

  // -- series: each agent's context size, on one clock ---------------------------------------

  function aligned() {
    var points = [];
    data.agents.forEach(function (a, ai) {
      var r = a.reductions;
      var before = filters.unit === "messages" ? r.mb : r.tb;
      var after = filters.unit === "messages" ? r.ma : r.ta;
      var last = a.start;
      points.push([a.start, ai, 0]);
      for (var i = 0; i < r.t.length; i++) {
        points.push([r.t[i], ai, before[i]]);
        points.push([r.t[i], ai, after[i]]);
        last = r.t[i];
      }
      points.push([Math.max(a.now.t, last), ai, filters.unit === "messages" ? a.now.messages : a.now.tokens]);
    });
    points.forEach(function (p, k) { p.push(k); });
    points.sort(function (p, q) { return p[0] - q[0] || p[3] - q[3]; });
    var xs = points.map(function (p) { return p[0]; });
    var columns = [xs];
    data.agents.forEach(function (a, ai) {
      columns.push(points.map(function (p) { return p[1] === ai ? p[2] : null; }));
    });
    return columns;
  }

  function fullRange() {
    var lo = Infinity, hi = -Infinity;
    data.agents.forEach(function (a) {
      lo = Math.min(lo, a.start);
      hi = Math.max(hi, a.now.t, a.reductions.t.length ? a.reductions.t[a.reductions.t.length - 1] : a.start);
    });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (hi - lo < 1) { hi = lo + 1; }
    var pad = (hi - lo) * 0.01;
    return [lo - pad, hi + pad];
  }

  // -- markers: drawn on the canvas, grouped when they crowd --------------------------------

  var drawn = [];   // what the last draw put on the chart, for hover and click

  function rarest(indexes, column) {
    var counts = new Map();
    indexes.forEach(function (i) { counts.set(column[i], (counts.get(column[i]) || 0) + 1); });
    var best = null, n = Infinity;
    counts.forEach(function (c, k) { if (c < n) { n = c; best = k; } });
    return best;
  }

  function drawMarkers(u) {
    var ctx = u.ctx, min = u.scales.x.min, max = u.scales.x.max;
    drawn = [];
    var glyphs = 0, grouped = 0, represented = 0, pins = 0;
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top - 14 * dpr, u.bbox.width, u.bbox.height + 14 * dpr);
    ctx.clip();
    data.agents.forEach(function (a, ai) {
      if (!agentShown(a.id)) return;
      var r = a.reductions, y = filters.unit === "messages" ? r.mb : r.tb;
      var group = null;
      var flush = function () {
        if (!group) return;
        var n = group.idx.length;
        var x = group.x / n;
        var trig = data.triggers[rarest(group.idx, r.trigger)];
        var radius = n > 1 ? Math.min(13, 8 + Math.log2(n)) : 7;
        ctx.beginPath();
        ctx.arc(x * dpr + u.bbox.left, group.y * dpr + u.bbox.top, radius * dpr, 0, 2 * Math.PI);
        ctx.fillStyle = triggerColor(trig);
        ctx.fill();
        ctx.lineWidth = (n > 1 ? 2.5 : 1.5) * dpr;
        ctx.strokeStyle = n > 1 ? agentColor(ai) : "#fff";
        ctx.stroke();
        ctx.fillStyle = "#fff";
        ctx.font = "700 " + (n > 1 ? 9 : 9) * dpr + "px system-ui, sans-serif";
        ctx.textAlign = "center";
        ctx.textBaseline = "middle";
        var label = n > 1 ? (n > 999 ? Math.round(n / 1000) + "k" : String(n)) : data.letters[r.strategy[group.idx[0]]];
        ctx.fillText(label, x * dpr + u.bbox.left, group.y * dpr + u.bbox.top + 0.5 * dpr);
        drawn.push({ kind: "reduction", x: x, y: group.y, r: radius, agent: ai, idx: group.idx });
        glyphs += 1; represented += n; if (n > 1) grouped += 1;
        group = null;
      };
      for (var i = 0; i < r.t.length; i++) {
        var t = r.t[i];
        if (t < min || t > max || !triggerShown(r.trigger[i]) || !strategyShown(r.strategy[i])) continue;
        var x = u.valToPos(t, "x"), yy = u.valToPos(y[i], "y");
        if (group && x - group.first > GROUP_PX) flush();
        if (!group) group = { first: x, x: 0, y: Infinity, idx: [] };
        group.x += x; group.y = Math.min(group.y, yy); group.idx.push(i);
      }
      flush();
      var p = a.pins, base = u.bbox.height / dpr - 3;
      for (var k = 0; k < p.t.length; k++) {
        if (p.t[k] < min || p.t[k] > max) continue;
        var px = u.valToPos(p.t[k], "x");
        ctx.save();
        ctx.translate((px - 6) * dpr + u.bbox.left, (base - 12) * dpr + u.bbox.top);
        ctx.scale(0.75 * dpr, 0.75 * dpr);
        ctx.lineWidth = 1.5;
        ctx.strokeStyle = cssVar("pin", "#b45309");
        ctx.fillStyle = p.pinned[k] ? cssVar("pin", "#b45309") : "#fff";
        ctx.fill(pinPath);
        ctx.stroke(pinPath);
        ctx.restore();
        drawn.push({ kind: "pin", x: px, y: base - 6, r: 7, agent: ai, idx: [k] });
        pins += 1;
      }
    });
    ctx.restore();
    figure.dataset.markers = String(glyphs);
    figure.dataset.grouped = String(grouped);
    figure.dataset.reductionsShown = String(represented);
    figure.dataset.pins = String(pins);
  }

  // -- the two charts ------------------------------------------------------------------------

  function width() { return Math.max(320, figure.clientWidth - 4); }
  var agentSeries = function () {
    return data.agents.map(function (a, i) {
      return { label: a.id, stroke: agentColor(i), width: 1.6, spanGaps: true, points: { show: false }, show: agentShown(a.id) };
    });
  };
  var full = fullRange();
  var initial = full.slice();
  var params = new URLSearchParams(location.search);
  if (!standalone && (params.get("from") || params.get("to"))) {
    var from = parseFloat(params.get("from")), to = parseFloat(params.get("to"));
    if (isFinite(from)) initial[0] = from;
    if (isFinite(to)) initial[1] = to;
  }
  var yRange = function (u, lo, hi) { return [0, Math.max(1, hi) * 1.08]; };
  var ready = false;
  var main = new uPlot({
    width: width(),
    height: 300,
    scales: { x: { time: true }, y: { range: yRange } },
    axes: [{ stroke: "#6b7385" }, { stroke: "#6b7385", label: filters.unit + " in context", size: 60 }],
    // (the unit can come from the URL: a reload keeps it)
    series: [{}].concat(agentSeries()),
    legend: { show: false },
    // Double-click is ours (back to the whole session, padded like the first view), not uPlot's.
    cursor: { drag: { x: true, y: false, setScale: true }, points: { show: false }, bind: { dblclick: function () { return null; } } },
    hooks: { draw: [drawMarkers], setScale: [onScale], setCursor: [onCursor] }
  }, aligned(), document.getElementById("plot-main"));
  var overview = new uPlot({
    width: width(),
    height: 64,
    scales: { x: { time: true }, y: { range: yRange } },
    axes: [{ stroke: "#6b7385", size: 24, font: "10px system-ui" }, { show: false }],
    series: [{}].concat(agentSeries().map(function (s) { s.width = 1; return s; })),
    legend: { show: false },
    cursor: { drag: { x: true, y: false, setScale: false }, points: { show: false } },
    select: { show: true },
    hooks: { setSelect: [function (u) {
      if (u.select.width < 2) return;
      var lo = u.posToVal(u.select.left, "x"), hi = u.posToVal(u.select.left + u.select.width, "x");
      main.setScale("x", { min: lo, max: hi });
    }] }
  }, aligned(), document.getElementById("plot-overview"));
  ready = true;

  function isFull() {
    var x = main.scales.x;
    return x.min <= full[0] + (full[1] - full[0]) * 0.002 && x.max >= full[1] - (full[1] - full[0]) * 0.002;
  }

  function fmtTime(t) { return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z"; }

  var tableTimer = null, started = false, ownRange = null;
  function onScale(u, key) {
    if (key !== "x" || !ready) return;
    var whole = isFull();
    figure.dataset.xMin = String(u.scales.x.min);
    figure.dataset.xMax = String(u.scales.x.max);
    figure.dataset.full = whole ? "1" : "0";
    document.getElementById("range-text").textContent = whole ? "the whole session" : fmtTime(u.scales.x.min) + " – " + fmtTime(u.scales.x.max);
    document.getElementById("reset-zoom").hidden = whole;
    var left = overview.valToPos(u.scales.x.min, "x"), right = overview.valToPos(u.scales.x.max, "x");
    overview.setSelect(whole ? { left: 0, width: 0, top: 0, height: 0 } : { left: Math.max(0, left), width: Math.max(2, right - left), top: 0, height: overview.bbox.height / dpr }, false);
    // A range the page set itself (following the ledger) brought its listing along.
    var own = ownRange && Math.abs(ownRange[0] - u.scales.x.min) < 1e-6 && Math.abs(ownRange[1] - u.scales.x.max) < 1e-6;
    if (started && !own) {
      clearTimeout(tableTimer);
      tableTimer = setTimeout(updateTable, 250);
    }
  }

  document.getElementById("reset-zoom").addEventListener("click", function () { main.setScale("x", { min: full[0], max: full[1] }); });
  main.over.addEventListener("dblclick", function () { main.setScale("x", { min: full[0], max: full[1] }); });
  window.addEventListener("resize", function () {
    main.setSize({ width: width(), height: 300 });
    overview.setSize({ width: width(), height: 64 });
  });

  // -- hover and click -------------------------------------------------------------------------

  var tip = document.getElementById("chart-tip");
  function hit(left, top) {
    var best = null, distance = Infinity;
    drawn.forEach(function (m) {
      var d = Math.hypot(m.x - left, m.y - top);
      if (d <= m.r + 3 && d < distance) { best = m; distance = d; }
    });
    return best;
  }
  function describe(m) {
    var a = data.agents[m.agent];
    if (m.kind === "pin") {
      var p = a.pins, k = m.idx[0];
      return [a.id + " · call " + p.call[k] + " · " + fmtTime(p.t[k]), (p.pinned[k] ? "pinned" : "unpinned") + " by " + p.by[k], p.text[k]];
    }
    var r = a.reductions, unit = filters.unit, before = unit === "messages" ? r.mb : r.tb, after = unit === "messages" ? r.ma : r.ta;
    if (m.idx.length === 1) {
      var i = m.idx[0];
      return [
        a.id + " · call " + r.call[i] + " · " + fmtTime(r.t[i]),
        data.triggers[r.trigger[i]] + " · " + data.strategies[r.strategy[i]],
        before[i] + " → " + after[i] + " " + unit + ", " + r.evicted[i] + " evicted",
        "click for the whole reduction"
      ];
    }
    var kinds = new Map();
    m.idx.forEach(function (i) {
      var key = data.triggers[r.trigger[i]] + " · " + data.strategies[r.strategy[i]];
      kinds.set(key, (kinds.get(key) || 0) + 1);
    });
    var lines = [a.id + " · " + m.idx.length + " reductions, calls " + r.call[m.idx[0]] + "–" + r.call[m.idx[m.idx.length - 1]]];
    kinds.forEach(function (n, key) { lines.push(n + "× " + key); });
    lines.push("click to zoom in");
    return lines;
  }
  function onCursor(u) {
    var m = u.cursor.left == null || u.cursor.left < 0 ? null : hit(u.cursor.left, u.cursor.top);
    main.over.style.cursor = m ? "pointer" : "";
    if (!m) { tip.hidden = true; return; }
    tip.replaceChildren.apply(tip, describe(m).map(function (line) {
      var div = document.createElement("div");
      div.textContent = line;
      return div;
    }));
    tip.hidden = false;
    var box = main.over.getBoundingClientRect(), host = figure.getBoundingClientRect();
    tip.style.left = Math.min(box.left - host.left + m.x + 12, host.width - tip.offsetWidth - 4) + "px";
    tip.style.top = Math.max(0, box.top - host.top + m.y - tip.offsetHeight - 10) + "px";
  }
  var downAt = null;
  main.over.addEventListener("mousedown", function (e) { downAt = [e.clientX, e.clientY]; });
  main.over.addEventListener("click", function (e) {
    if (downAt && Math.hypot(e.clientX - downAt[0], e.clientY - downAt[1]) > 3) return;  // a drag to zoom
    var box = main.over.getBoundingClientRect();
    var m = hit(e.clientX - box.left, e.clientY - box.top);
    if (!m || m.kind !== "reduction") return;
    var a = data.agents[m.agent], r = a.reductions;
    if (m.idx.length > 1) {
      var lo = r.t[m.idx[0]], hi = r.t[m.idx[m.idx.length - 1]], pad = Math.max(1, (hi - lo) * 0.15);
      main.setScale("x", { min: lo - pad, max: hi + pad });
      return;
    }
    var id = r.id[m.idx[0]];
    if (standalone) {
      location.hash = "r-" + id;
    } else {
      location.href = figure.dataset.reductionBase + new URLSearchParams({ session: figure.dataset.session, agent: a.id, id: id }).toString();
    }
  });

  // -- filters change: redraw, and narrow the reductions listed -----------------------------

  card.addEventListener("change", function (e) {
    var unitChanged = e.target && e.target.name === "unit";
    readFilters();
    data.agents.forEach(function (a, i) {
      main.setSeries(i + 1, { show: agentShown(a.id) });
      overview.setSeries(i + 1, { show: agentShown(a.id) });
    });
    if (unitChanged) {
      main.axes[1].label = filters.unit + " in context";
      main.setData(aligned(), false);
      overview.setData(aligned());
    }
    main.redraw(false);
    updateTable();
  });
  card.addEventListener("submit", function (e) { e.preventDefault(); updateTable(); });
  card.classList.add("scripted");

  function filterParams(target) {
    [["trigger", filters.triggers], ["strategy", filters.strategies], ["agent_filter", filters.agents]].forEach(function (pair) {
      if (pair[1].all && !pair[1].every) pair[1].on.forEach(function (v) { target.append(pair[0], v); });
    });
    if (!isFull()) {
      target.set("from", main.scales.x.min.toFixed(3));
      target.set("to", main.scales.x.max.toFixed(3));
    }
  }

  var tableRequest = 0;
  function updateTable() {
    if (standalone) { packed.reductions && packed.reductions.refilter(); return; }
    var url = new URL(location.pathname, location.href);
    var current = new URLSearchParams(location.search);
    ["id", "agent", "q"].forEach(function (k) { if (current.get(k)) url.searchParams.set(k, current.get(k)); });
    filterParams(url.searchParams);
    if (filters.unit !== "tokens") url.searchParams.set("unit", filters.unit);
    history.replaceState(null, "", url.pathname + "?" + url.searchParams.toString() + location.hash);
    url.searchParams.set("part", "reductions");
    var mine = ++tableRequest;
    fetch(url.toString(), { cache: "no-store" }).then(function (res) { return res.ok ? res.text() : null; }).then(function (html) {
      if (html === null || mine !== tableRequest) return;
      var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("reductions-part");
      var old = document.getElementById("reductions-part");
      if (fresh && old) old.replaceWith(document.importNode(fresh, true));
      figure.dataset.tableUpdates = String((parseInt(figure.dataset.tableUpdates || "0", 10)) + 1);
    });
  }

  // -- a self-contained file: listings packed, paged, filtered and searched here ----------------

  var packed = {};
  function Packed(name, rows, body, pager, match) {
    this.name = name; this.rows = rows; this.body = body; this.pager = pager; this.match = match;
    this.size = 50; this.page = 1; this.shown = rows;
    var self = this;
    if (pager) {
      pager.hidden = false;
      pager.addEventListener("click", function (e) {
        var go = e.target && e.target.dataset ? e.target.dataset.go : null;
        if (!go) return;
        var last = Math.max(1, Math.ceil(self.shown.length / self.size));
        self.show({ first: 1, prev: self.page - 1, next: self.page + 1, last: last }[go]);
      });
    }
    this.refilter();
  }
  Packed.prototype.refilter = function () {
    var match = this.match;
    this.shown = match ? this.rows.filter(function (row) { return match(row); }) : this.rows;
    this.show(1);
  };
  Packed.prototype.show = function (page) {
    var pages = Math.max(1, Math.ceil(this.shown.length / this.size));
    this.page = Math.min(Math.max(1, page), pages);
    this.body.replaceChildren.apply(this.body, this.shown.slice((this.page - 1) * this.size, this.page * this.size));
    if (this.pager) {
      $(".where", this.pager).textContent = "page " + this.page + " of " + pages + " · " + this.shown.length + " rows";
    }
  };
  Packed.prototype.reveal = function (id) {
    var at = this.shown.findIndex(function (row) { return row.id === id; });
    if (at < 0) { this.shown = this.rows; at = this.rows.findIndex(function (row) { return row.id === id; }); }
    if (at < 0) return false;
    this.show(Math.floor(at / this.size) + 1);
    return true;
  };

  function unpack(element) {
    var text = atob(element.textContent.trim());
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (markup) {
      // The server's own rows (escaped when they were rendered); parsed inert, then adopted.
      var doc = new DOMParser().parseFromString("<table><tbody>" + markup + "</tbody></table>", "text/html");
      return $$("tbody > tr", doc).map(function (row) { return document.adoptNode(row); });
    });
  }

  function reductionMatch(row) {
    var t = parseFloat(row.dataset.t);
    return !filters.triggers.off.has(row.dataset.trigger) && !filters.strategies.off.has(row.dataset.strategy) &&
      agentShown(row.dataset.agent) && (isFull() || (t >= main.scales.x.min && t <= main.scales.x.max));
  }

  function revealHash() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id) return;
    if (!document.getElementById(id)) {
      Object.keys(packed).some(function (name) { return packed[name].reveal(id); });
    }
    var target = document.getElementById(id);
    if (!target) return;
    for (var node = target.parentElement; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    $$(".flash").forEach(function (el) { el.classList.remove("flash"); });
    target.classList.add("flash");
    target.scrollIntoView({ block: "center" });
  }

  function clientSearch(form) {
    var box = $("input[type='search']", form), results = document.getElementById("search-results");
    var body = $("tbody", results), note = $(".hint", results);
    var needle = box.value.trim().toLowerCase();
    results.hidden = !needle;
    if (!needle) return;
    var hits = [];
    Object.keys(packed).forEach(function (name) {
      if (name.indexOf("history-") !== 0) return;
      packed[name].rows.forEach(function (row) {
        if (row.textContent.toLowerCase().indexOf(needle) >= 0) {
          var copy = row.cloneNode(true);
          copy.removeAttribute("id");
          var cell = document.createElement("td");
          cell.className = "agent";
          cell.textContent = name.slice("history-".length);
          copy.insertBefore(cell, copy.firstChild);
          hits.push(copy);
        }
      });
    });
    note.textContent = hits.length + (hits.length === 1 ? " entry holds “" : " entries hold “") + box.value.trim() + "” in its first characters.";
    packed.search = new Packed("search", hits, body, byData("pager", "search", results), null);
    figure.dataset.searchHits = String(hits.length);
  }

  if (standalone) {
    var jobs = $$("script.pack").map(function (element) {
      var name = element.dataset.pack;
      return unpack(element).then(function (rows) {
        var table = byData("packed", name);
        packed[name] = new Packed(name, rows, $("tbody", table), byData("pager", name), name === "reductions" ? reductionMatch : null);
      });
    });
    Promise.all(jobs).then(function () {
      figure.dataset.unpacked = "1";
      revealHash();
    });
    window.addEventListener("hashchange", revealHash);
    var searchForm = $("form[data-client-search]");
    if (searchForm) {
      searchForm.addEventListener("submit", function (e) { e.preventDefault(); clientSearch(searchForm); });
    }
  }

  // -- following a running agent: ask again with If-None-Match, swap what changed -------------

  var etag = figure.dataset.etag || "";
  var liveStatus = document.getElementById("live-status");
  function follow() {
    if (standalone || !etag) return;
    liveStatus.hidden = false;
    var failures = 0, pause = 2000;
    var tick = function () {
      if (document.hidden) { setTimeout(tick, 2000); return; }
      var asked = Date.now();
      fetch(location.href, { headers: { "If-None-Match": etag }, cache: "no-store" }).then(function (res) {
        if (res.status === 304) { pause = 2000; return null; }
        if (!res.ok) throw new Error(String(res.status));
        etag = res.headers.get("ETag") || etag;
        // A page that is costly to draw (a long history) is asked for less often while it keeps changing.
        pause = Math.min(30000, Math.max(2000, 4 * (Date.now() - asked)));
        return res.text();
      }).then(function (html) {
        failures = 0;
        liveStatus.classList.remove("lost");
        if (html !== null) swap(new DOMParser().parseFromString(html, "text/html"));
      }).catch(function () {
        failures += 1;
        liveStatus.classList.add("lost");
        $(".text", liveStatus).textContent = "the server does not answer; retrying";
      }).then(function () { setTimeout(tick, failures ? Math.min(30000, 2000 * Math.pow(2, failures)) : pause); });
    };
    setTimeout(tick, 2000);
  }

  function swap(doc) {
    var json = doc.getElementById("chart-data");
    if (json && JSON.parse(json.textContent).agents.length !== data.agents.length) {
      location.reload();  // a new agent: the page's layout changes, not only its data
      return;
    }
    $$("[data-live]", doc).forEach(function (fresh) {
      var old = document.getElementById(fresh.id);
      if (!old) return;
      var copy = document.importNode(fresh, true);
      if (old.tagName === "DETAILS") copy.open = old.open;
      copy.classList.add("fresh");
      old.replaceWith(copy);
    });
    readFilters();  // the filters may have new kinds to choose from
    if (json) {
      var following = isFull();
      data = JSON.parse(json.textContent);
      document.getElementById("chart-data").textContent = json.textContent;  // a data block: never run
      full = fullRange();
      var columns = aligned();
      overview.setData(columns);
      if (following) {
        main.setData(columns, false);
        ownRange = full.slice();
        main.setScale("x", { min: full[0], max: full[1] });
      } else {
        main.setData(columns, false);
        main.redraw(false);
      }
    }
    var stamp = new Date().toISOString().slice(11, 19);
    $(".text", liveStatus).textContent = "following the ledger · last change seen " + stamp + "Z";
    figure.dataset.liveUpdates = String(parseInt(figure.dataset.liveUpdates || "0", 10) + 1);
  }

  // For people poking at a page (and its tests): the charts, what was drawn where, the packed listings.
  window.contextledger = { main: main, overview: overview, markers: function () { return drawn.slice(); }, packed: packed };

  main.setScale("x", { min: initial[0], max: initial[1] });
  onScale(main, "x");
  // uPlot commits scale changes in a microtask: only the user's later zooms narrow the listing.
  setTimeout(function () {
    started = true;
    figure.dataset.ready = "1";
    follow();
  }, 0);
})();
