// redis-reclaim dashboard: auto-refresh, sortable tables, the redrive progress bar. No inline
// script runs on these pages (Content-Security-Policy: script-src 'self').
(function () {
  "use strict";

  // -- auto-refresh (the overview): reloads unless paused or a form field is in use ---------------
  var secs = parseInt(document.body.dataset.refresh || "0", 10);
  var paused = sessionStorage.getItem("reclaim-refresh-paused") === "1";
  var toggle = document.getElementById("pause-refresh");
  if (toggle) {
    toggle.textContent = paused ? "resume" : "pause";
    toggle.addEventListener("click", function (ev) {
      ev.preventDefault();
      paused = !paused;
      sessionStorage.setItem("reclaim-refresh-paused", paused ? "1" : "0");
      toggle.textContent = paused ? "resume" : "pause";
    });
  }
  if (secs > 0) {
    setInterval(function () {
      var a = document.activeElement;
      if (!paused && !(a && (a.tagName === "INPUT" || a.tagName === "SELECT"))) location.reload();
    }, secs * 1000);
  }

  // -- sortable tables: click a header; the order is kept across refreshes ----------------------
  function sortBy(table, col, desc) {
    var th = table.tHead.rows[0].cells[col];
    var num = th.dataset.type === "num";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).filter(function (r) { return r.cells.length > 1; });
    rows.sort(function (a, b) {
      var x = a.cells[col], y = b.cells[col];
      var vx = num ? parseFloat(x.dataset.v || x.textContent) : x.textContent.trim();
      var vy = num ? parseFloat(y.dataset.v || y.textContent) : y.textContent.trim();
      var c = num ? vx - vy : String(vx).localeCompare(String(vy));
      return desc ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h, i) {
      h.classList.remove("asc", "desc");
      if (i === col) h.classList.add(desc ? "desc" : "asc");
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var keyName = "reclaim-sort-" + table.id;
    var saved = sessionStorage.getItem(keyName);
    if (saved) {
      var s = saved.split(":");
      sortBy(table, parseInt(s[0], 10), s[1] === "desc");
    }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () {
        var desc = th.classList.contains("asc");
        sortBy(table, i, desc);
        sessionStorage.setItem(keyName, i + ":" + (desc ? "desc" : "asc"));
      });
    });
  });

  // -- select all (a DLQ page) -------------------------------------------------------------
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      Array.prototype.forEach.call(document.querySelectorAll("#entries input[name=id]"), function (b) {
        b.checked = all.checked;
      });
    });
  }

  // -- the redrive progress bar: polls REDRIVE STATUS while the task runs ------------------------
  var task = document.getElementById("task");
  if (task && task.dataset.running === "yes") {
    var url = "/api/redrive-status?db=" + encodeURIComponent(task.dataset.db) +
      "&key=" + encodeURIComponent(task.dataset.key);
    var poll = function () {
      fetch(url, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (st) {
        if (!st) return;
        var bar = document.getElementById("bar");
        var total = st.total || 0;
        if (bar) { bar.max = total || 1; bar.value = st.examined; }
        var pct = total ? Math.floor(st.examined * 100 / total) : 100;
        document.getElementById("pct").textContent = pct + "%";
        document.getElementById("task-state").textContent = st.state;
        document.getElementById("moved").textContent = st.moved;
        document.getElementById("skipped").textContent = st.skipped;
        document.getElementById("left").textContent = st.left;
        if (st.state === "running" || st.state === "canary") {
          setTimeout(poll, 500);
        } else {
          // the task ended: show the DLQ as it is now (the page then polls no more)
          setTimeout(function () { location.reload(); }, 1000);
        }
      }).catch(function () { setTimeout(poll, 2000); });
    };
    poll();
  }
})();
