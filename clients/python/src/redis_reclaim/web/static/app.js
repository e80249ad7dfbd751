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

  // -- a DLQ page's checked entries, kept across its pages in this tab (sessionStorage), at most
  // 1000 (RECLAIM.REDRIVE ... IDS's maximum); those of other pages go with the form as hidden
  // inputs. A redrive or delete of the selection forgets it.
  var form = document.getElementById("redrive-form");
  var taskBox = document.getElementById("task");
  var boxes = Array.prototype.slice.call(document.querySelectorAll("#entries input[name=id]"));
  if (form && taskBox) {
    var MAX = 1000;
    var store = "reclaim-selected:" + taskBox.dataset.db + ":" + taskBox.dataset.key;
    var selected = [];
    try {
      var got = JSON.parse(sessionStorage.getItem(store) || "[]");
      if (Array.isArray(got)) selected = got.filter(function (v) { return typeof v === "string"; }).slice(0, MAX);
    } catch (e) { selected = []; }
    var here = {};
    boxes.forEach(function (b) { here[b.value] = b; });
    var holder = document.createElement("span");
    holder.id = "selected-elsewhere";
    form.appendChild(holder);
    var count = document.getElementById("selection-count");
    var show = function (full) {
      holder.textContent = "";
      var elsewhere = 0;
      selected.forEach(function (id) {
        if (here[id]) return;
        elsewhere += 1;
        var h = document.createElement("input");
        h.type = "hidden";
        h.name = "id";
        h.value = id;
        holder.appendChild(h);
      });
      if (count) {
        count.textContent = selected.length + " selected" +
          (elsewhere ? " (" + elsewhere + " on other pages)" : "") +
          (full ? ": at most " + MAX + " at a time" : "");
        count.dataset.n = String(selected.length);
      }
    };
    var save = function (full) {
      sessionStorage.setItem(store, JSON.stringify(selected));
      show(full);
    };
    var toggle = function (b) {
      var i = selected.indexOf(b.value);
      if (b.checked && i < 0) {
        if (selected.length >= MAX) { b.checked = false; return true; }
        selected.push(b.value);
      } else if (!b.checked && i >= 0) {
        selected.splice(i, 1);
      }
      return false;
    };
    boxes.forEach(function (b) {
      b.checked = selected.indexOf(b.value) >= 0;
      b.addEventListener("change", function () { save(toggle(b)); });
    });
    var all = document.getElementById("select-all");
    if (all) {
      all.addEventListener("change", function () {
        var full = false;
        boxes.forEach(function (b) { b.checked = all.checked; full = toggle(b) || full; });
        save(full);
      });
    }
    var clear = document.getElementById("clear-selection");
    if (clear) {
      clear.addEventListener("click", function (ev) {
        ev.preventDefault();
        selected = [];
        boxes.forEach(function (b) { b.checked = false; });
        save(false);
      });
    }
    form.addEventListener("submit", function (ev) {
      var by = ev.submitter;
      if (by && (by.value === "redrive-selected" || by.value === "delete")) sessionStorage.removeItem(store);
    });
    show(false);
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
