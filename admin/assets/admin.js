/* admin.js — the panel's only script (served from the binary, see admin/README.md).
 * Keyboard navigation, search as you type, the host charts (SVG drawn here). Text from the
 * server goes into the page with textContent; the one HTML fragment taken from the server
 * (fleet rows) is built and escaped by the server. */
(function () {
  "use strict";
  var $ = function (sel, root) { return (root || document).querySelector(sel); };
  var $$ = function (sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); };
  var SVG = "http://www.w3.org/2000/svg";

  function typing(e) {
    var t = e.target;
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }

  /* ---- rows: click, j/k, Enter ---- */
  var selected = null;
  function rowsTable() { return $("table.nav-rows tbody") || $("table.data tbody"); }
  function linkRows() {
    var tb = rowsTable();
    return tb ? $$("tr[data-href]", tb) : [];
  }
  function select(tr) {
    if (selected) selected.classList.remove("selected");
    selected = tr;
    if (tr) {
      tr.classList.add("selected");
      tr.scrollIntoView({ block: "nearest" });
    }
  }
  function move(d) {
    var rows = linkRows();
    if (!rows.length) return;
    var i = rows.indexOf(selected);
    i = i < 0 ? (d > 0 ? 0 : rows.length - 1) : Math.max(0, Math.min(rows.length - 1, i + d));
    select(rows[i]);
  }
  document.addEventListener("click", function (e) {
    var tr = e.target.closest && e.target.closest("tr[data-href]");
    if (!tr || e.target.closest("a, button, input, select, textarea")) return;
    if (window.getSelection && String(window.getSelection()).length) return;
    window.location.href = tr.getAttribute("data-href");
  });

  /* ---- keyboard ---- */
  var pendingG = false;
  var keys = $("#keys");
  function toggleKeys(show) { if (keys) keys.hidden = !show; }
  var showKeys = $("#show-keys");
  if (showKeys) showKeys.addEventListener("click", function () { toggleKeys(true); });
  if (keys) keys.addEventListener("click", function (e) { if (e.target === keys) toggleKeys(false); });

  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") {
      toggleKeys(false);
      if (typing(e)) e.target.blur();
      return;
    }
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") {
      var form = e.target.form || $("#console");
      if (form && form.id === "console") {
        e.preventDefault();
        var run = $("#run");
        if (form.requestSubmit) form.requestSubmit(run); else run.click();
      }
      return;
    }
    if (typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
    if (pendingG) {
      pendingG = false;
      var link = $('.nav-item[data-key="' + e.key + '"]');
      if (link) { e.preventDefault(); link.click(); }
      return;
    }
    switch (e.key) {
      case "/": {
        var s = $("#fleet-search") || $("#global-search");
        if (s) { e.preventDefault(); s.focus(); s.select(); }
        break;
      }
      case "?": toggleKeys(keys && keys.hidden); break;
      case "g": pendingG = true; setTimeout(function () { pendingG = false; }, 1200); break;
      case "j": e.preventDefault(); move(1); break;
      case "k": e.preventDefault(); move(-1); break;
      case "Enter":
        if (selected) { e.preventDefault(); window.location.href = selected.getAttribute("data-href"); }
        break;
      case "[": { var p = $("#prev-page"); if (p) p.click(); break; }
      case "]": { var n = $("#next-page"); if (n) n.click(); break; }
    }
  });

  /* ---- fleet: search as you type ---- */
  var fleetSearch = $("#fleet-search");
  var filters = $("#fleet-filters");
  if (fleetSearch && filters) {
    var timer = null, seq = 0;
    var refresh = function () {
      var params = new URLSearchParams(new FormData(filters));
      var mine = ++seq;
      fetch("/api/tenants?" + params.toString(), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (j) {
          if (!j || mine !== seq) return;
          $("#fleet-rows").innerHTML = j.html;   /* built and escaped by the server */
          var c = $("#fleet-count");
          if (c && j.total >= 0) c.textContent = j.total + " matching";
          var prev = $("#prev-page");
          if (prev) prev.replaceWith(Object.assign(document.createElement("span"), { className: "disabled", textContent: "← Previous" }));
          var next = $("#next-page");
          if (j.next) {
            var href = "/?" + params.toString() + "&after=" + encodeURIComponent(j.next);
            if (next) next.href = href;
          } else if (next) {
            next.replaceWith(Object.assign(document.createElement("span"), { className: "disabled", textContent: "Next →" }));
          }
          selected = null;
          history.replaceState(null, "", "/?" + params.toString());
        })
        .catch(function () {});
    };
    fleetSearch.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(refresh, 200);
    });
    $$("select", filters).forEach(function (s) { s.addEventListener("change", function () { filters.submit(); }); });
  }
  var globalSearch = $("#global-search");
  if (globalSearch && fleetSearch) globalSearch.closest("form").hidden = true;

  /* ---- charts ---- */
  function el(name, attrs, text) {
    var n = document.createElementNS(SVG, name);
    for (var k in attrs) n.setAttribute(k, attrs[k]);
    if (text !== undefined) n.textContent = text;
    return n;
  }
  function niceMax(v) {
    if (v <= 1) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var m = [1, 2, 5, 10].find(function (x) { return x * p >= v; });
    return m * p;
  }
  function lineChart(box, points, seconds) {
    var w = box.clientWidth || 600, h = box.clientHeight || 160, pad = { l: 40, r: 8, t: 8, b: 20 };
    var svg = el("svg", { viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none" });
    var max = niceMax(Math.max.apply(null, points.concat([1])));
    var iw = w - pad.l - pad.r, ih = h - pad.t - pad.b;
    for (var g = 0; g <= 4; g++) {
      var y = pad.t + ih - (ih * g) / 4;
      svg.appendChild(el("line", { x1: pad.l, x2: w - pad.r, y1: y, y2: y, "class": "grid-line" }));
      svg.appendChild(el("text", { x: pad.l - 6, y: y + 4, "text-anchor": "end" }, String(Math.round((max * g) / 4 * 10) / 10)));
    }
    svg.appendChild(el("text", { x: pad.l, y: h - 4 }, "-" + seconds + " s"));
    svg.appendChild(el("text", { x: w - pad.r, y: h - 4, "text-anchor": "end" }, "now"));
    if (points.length > 1) {
      var step = iw / (points.length - 1), d = "", i;
      for (i = 0; i < points.length; i++) {
        var px = pad.l + i * step, py = pad.t + ih - (ih * points[i]) / max;
        d += (i ? "L" : "M") + px.toFixed(1) + " " + py.toFixed(1);
      }
      svg.appendChild(el("path", { d: d + "L" + (pad.l + iw) + " " + (pad.t + ih) + "L" + pad.l + " " + (pad.t + ih) + "Z", "class": "area" }));
      svg.appendChild(el("path", { d: d, "class": "line" }));
    }
    box.replaceChildren(svg);
  }
  function barChart(box, tenants) {
    var w = box.clientWidth || 600, rowH = 22, pad = { l: 120, r: 60 };
    var list = tenants.slice(0, 10);
    var h = Math.max(40, list.length * rowH + 8);
    box.style.height = h + "px";
    var svg = el("svg", { viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none" });
    var max = niceMax(Math.max.apply(null, list.map(function (t) { return t.requests; }).concat([1])));
    var iw = w - pad.l - pad.r;
    list.forEach(function (t, i) {
      var y = 4 + i * rowH;
      var rw = (iw * t.requests) / max, ew = (iw * t.errors) / max;
      var a = el("a", { href: "/t/" + encodeURIComponent(t.slug) });
      a.appendChild(el("text", { x: pad.l - 8, y: y + 14, "text-anchor": "end" }, t.slug));
      svg.appendChild(a);
      svg.appendChild(el("rect", { x: pad.l, y: y + 3, width: Math.max(1, rw), height: 14, rx: 2, "class": "bar-req" }));
      if (t.errors > 0) svg.appendChild(el("rect", { x: pad.l, y: y + 3, width: Math.max(1, ew), height: 14, rx: 2, "class": "bar-err" }));
      svg.appendChild(el("text", { x: pad.l + rw + 6, y: y + 14 }, t.requests + (t.errors ? " · " + t.errors + " err" : "")));
    });
    if (!list.length) svg.appendChild(el("text", { x: 8, y: 24 }, "no tenant requests yet"));
    box.replaceChildren(svg);
  }
  function fact(dl, k, v) {
    var dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = k; dd.textContent = v;
    dl.appendChild(dt); dl.appendChild(dd);
  }
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }

  var host = $("#host");
  if (host) {
    var samples = [], last = null, N = 60, period = 2000;
    var tick = function () {
      fetch("/api/status", { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) {
          if (!s) return;
          var now = performance.now(), req = s.pool.requests;
          if (last) samples.push(Math.max(0, (req - last.req) / ((now - last.t) / 1000)));
          last = { t: now, req: req };
          if (samples.length > N) samples.shift();
          lineChart($("#chart-rps"), samples.length ? samples : [0], (N * period) / 1000);
          $("#rps-now").textContent = samples.length ? samples[samples.length - 1].toFixed(1) + " req/s now" : "measuring…";
          var p = s.pool, dl = $("#pool");
          dl.replaceChildren();
          fact(dl, "Process manager", p.pm);
          fact(dl, "Workers", p.total + " (" + p.active + " busy, " + p.idle + " idle)");
          fact(dl, "Max children", p.max_children);
          fact(dl, "Requests", p.requests);
          fact(dl, "Uptime", p.uptime_s + " s");
          fact(dl, "Listen queue", p.listen_queue === null ? "n/a" : p.listen_queue + " / " + p.listen_queue_len);
          fact(dl, "Slow / timeouts", p.slow_requests + " / " + p.timeouts);
          fact(dl, "Crashes / respawns", p.crashes + " / " + p.respawns);
          fact(dl, "Refused (tenant cap)", p.rejected_tenant_limit);
          $("#host-summary").textContent = p.total + " workers · generation " + p.generation;
          var tb = $("#workers tbody");
          tb.replaceChildren();
          s.workers.forEach(function (w) {
            var tr = document.createElement("tr");
            cell(tr, w.pid, "mono");
            cell(tr, w.generation);
            cell(tr, w.state);
            cell(tr, w.requests, "num");
            cell(tr, w.request ? w.request.method + " " + w.request.uri + (w.request.tenant ? " (" + w.request.tenant + ")" : "") : "", "mono");
            cell(tr, w.last_status, "num");
            cell(tr, (w.last_duration_us / 1000).toFixed(1), "num");
            tb.appendChild(tr);
          });
          barChart($("#chart-tenants"), s.tenants);
        })
        .catch(function () {});
    };
    tick();
    setInterval(tick, period);
  }

  var ts = $("#tenant-stats");
  if (ts) {
    fetch("/api/status", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) return;
        var slug = ts.getAttribute("data-slug");
        var t = s.tenants.find(function (x) { return x.slug === slug; });
        var dl = document.createElement("dl");
        dl.className = "facts";
        if (t) {
          fact(dl, "Requests", t.requests);
          fact(dl, "Errors (5xx)", t.errors);
          fact(dl, "Refused (cap)", t.rejected);
          fact(dl, "In flight", t.inflight + " (max " + t.max_inflight + ")");
        } else {
          fact(dl, "Requests", "none counted since the host started");
        }
        ts.replaceChildren(dl);
      })
      .catch(function () {});
  }

  /* ---- console: keep the editor comfortable ---- */
  var sql = $("#sql");
  if (sql) {
    sql.addEventListener("keydown", function (e) {
      if (e.key === "Tab" && !e.shiftKey) {
        e.preventDefault();
        var s = sql.selectionStart;
        sql.setRangeText("    ", s, sql.selectionEnd, "end");
      }
    });
    if (!sql.value) sql.focus();
  }
  var confirmSlug = $("#confirm-slug");
  if (confirmSlug) confirmSlug.focus();
})();
