// Live pages: keep the page in step with the server's per-session sequence numbers.
//
// Every websocket message of the session page starts with a marker (#live-seq) carrying the seqs it covers
// (data-from .. data-seq); transient progress carries data-after-seq instead. The page's own #live-seq holds the
// newest seq it shows. A gap, an overlap or a reconnect makes the page re-sync by fetching its live region over
// HTTP (the same partials, as out-of-band swaps). Snapshot fragments carry data-seq and never replace a newer one.
(function () {
  "use strict";

  // On a phone a wide table scrolls sideways in its own box (compactweb.css) rather than widening the page. A box
  // that scrolls must be reachable from the keyboard, so such a table takes focus while, and only while, it does.
  function focusableWideTables() {
    document.querySelectorAll("main table").forEach(function (table) {
      if (table.scrollWidth > table.clientWidth + 1) {
        if (!table.hasAttribute("tabindex")) { table.setAttribute("tabindex", "0"); table.dataset.scrolls = "1"; }
      } else if (table.dataset.scrolls) {
        table.removeAttribute("tabindex");
        delete table.dataset.scrolls;
      }
    });
  }
  document.addEventListener("DOMContentLoaded", focusableWideTables);
  window.addEventListener("resize", focusableWideTables);
  document.addEventListener("htmx:afterSettle", focusableWideTables);

  // Ages ("4 min ago", the `ago` filter's <time data-age>) move on while the page stays open: each counts from when
  // this page got it (its data-age then), so a browser clock that differs from the server's changes nothing.
  function ageWords(seconds) {
    if (seconds < 60) { return "just now"; }
    if (seconds < 3600) { return Math.floor(seconds / 60) + " min ago"; }
    if (seconds < 86400) { return Math.floor(seconds / 3600) + " h ago"; }
    return Math.floor(seconds / 86400) + " d ago";
  }
  function refreshAges() {
    var now = Date.now();
    document.querySelectorAll("time[data-age]").forEach(function (el) {
      if (!el.dataset.seenAt) { el.dataset.seenAt = String(now); }
      var seconds = parseFloat(el.dataset.age) + (now - parseFloat(el.dataset.seenAt)) / 1000;
      var words = ageWords(Math.max(seconds, 0));
      if (el.textContent !== words) { el.textContent = words; }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { refreshAges(); setInterval(refreshAges, 15000); });
  document.addEventListener("htmx:afterSettle", refreshAges);
  document.addEventListener("htmx:wsAfterMessage", refreshAges);  // a live fragment's ages count from now on

  // The top bar's menu folds behind its button on a phone (the CSS hides it only when this script runs).
  document.documentElement.classList.add("js");
  document.addEventListener("click", function (evt) {
    var toggle = evt.target.closest && evt.target.closest(".nav-toggle");
    if (!toggle) { return; }
    var open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    toggle.closest(".topbar").classList.toggle("topbar--open", open);
  });

  function liveRoot() { return document.querySelector("[data-live]"); }
  function pageSeq() {
    var el = document.getElementById("live-seq");
    return el ? parseInt(el.dataset.seq || "0", 10) : 0;
  }

  var resyncing = false;
  var resyncAgain = false;
  function resync(reason) {
    var root = liveRoot();
    if (!root || !root.dataset.resyncUrl || !window.htmx) { return; }
    if (resyncing) { resyncAgain = true; return; }
    resyncing = true;
    root.dataset.resyncs = String(parseInt(root.dataset.resyncs || "0", 10) + 1);
    root.dataset.lastResync = reason;
    var url = root.dataset.resyncUrl;
    if (root.dataset.live === "fleet") { url += (url.indexOf("?") < 0 ? "?" : "&") + "rows=" + fleetRowIds().join(","); }
    htmx.ajax("GET", url, { source: root, target: root, swap: "none" }).finally(function () {
      resyncing = false;
      toBottom();
      if (resyncAgain) { resyncAgain = false; resync("queued"); }
    });
  }

  function markerOf(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return t.content.querySelector("[data-live-marker]");
  }

  function setStatus(state) {
    document.querySelectorAll(".live-dot").forEach(function (dot) { dot.dataset.state = state; });
  }

  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var root = liveRoot();
    if (!root || root.dataset.live !== "session") { return; }
    var m = markerOf(evt.detail.message);
    if (!m) { return; }
    var current = pageSeq();
    var kind = m.dataset.liveMarker;
    var seq = parseInt(m.dataset.seq || "0", 10);
    if (kind === "hello") {
      evt.preventDefault();
      if (seq !== current) { resync("hello"); }
      return;
    }
    if (kind === "transient") {
      if (parseInt(m.dataset.afterSeq || "0", 10) > current) { resync("transient-ahead"); }
      return; // progress applies whatever the seq
    }
    if (kind === "resync") { evt.preventDefault(); resync("server"); return; }
    var from = parseInt(m.dataset.from || "0", 10);
    if (seq <= current) { evt.preventDefault(); return; } // already shown
    if (from !== current + 1) { evt.preventDefault(); resync("gap"); }
  });

  // The history sticks to its newest item while the reader is at the bottom; scrolled up, it stays put.
  var stick = true;
  function historyList() { return document.getElementById("history-items"); }
  function atBottom(el) { return el.scrollHeight - el.scrollTop - el.clientHeight < 24; }
  function toBottom() { var el = historyList(); if (el) { el.scrollTop = el.scrollHeight; } }
  document.addEventListener("DOMContentLoaded", toBottom);
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var el = historyList();
    stick = !el || atBottom(el);
  }, true);

  document.addEventListener("htmx:wsAfterMessage", function () {
    if (stick) { toBottom(); }
    // Appends advance the page's seq; containers that appends grow follow it so a stale snapshot cannot win.
    var seq = String(pageSeq());
    document.querySelectorAll("[data-seq-follow]").forEach(function (el) { el.dataset.seq = seq; });
  });

  // A snapshot (a row, the meter, the history) never replaces a newer one: a late re-sync answer or a coalesced
  // update can arrive after a fresher fragment.
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    var target = evt.detail.target;
    var frag = evt.detail.fragment;
    var incoming = frag && frag.nodeType === 11 ? frag.firstElementChild : frag;
    if (!target || !incoming || !incoming.dataset || !target.dataset) { return; }
    if (incoming.dataset.seq === undefined || target.dataset.seq === undefined) { return; }
    if (parseInt(incoming.dataset.seq, 10) < parseInt(target.dataset.seq, 10)) {
      evt.detail.shouldSwap = false;
    }
  });

  // A fleet page keeps its rows in its sort after live updates: sessions that can still compact first, finished ones
  // (data-finished) last, each group nearest the auto-compact limit first (each row's meter's data-fill, as the
  // server ranked the page), or by id (newest, oldest). Only the page's own rows are here.
  // While the pointer or the focus is in the table the order holds (a row and its Pause button must not move
  // between aiming and clicking): the pending re-sort waits until they leave, or the "Re-sort" button asks for it.
  function fleetRowIds() {
    return Array.prototype.map.call(document.querySelectorAll("#fleet-rows tr[id^='session-']"), rowId);
  }
  function rowId(tr) { return parseInt(tr.id.replace("session-", ""), 10) || 0; }
  function rowFill(tr) { var c = tr.querySelector("[data-fill]"); return c ? parseFloat(c.dataset.fill) || 0 : 0; }
  function rowDone(tr) { return tr.hasAttribute("data-finished") ? 1 : 0; }
  var fleetHeld = { pointer: false, focus: false };
  function fleetOrderHeld() { return fleetHeld.pointer || fleetHeld.focus; }
  function showOrderState(state) {
    var box = document.getElementById("fleet-order");
    if (!box) { return; }
    box.dataset.order = state;
    var text = box.querySelector("[data-order-text]");
    if (text) {
      text.textContent = state === "held" ? "Order held while you point at the table; new rankings wait"
        : state === "pending" ? "Order held while you point at the table; rows have new rankings"
        : "Order updates live";
    }
  }
  function sortFleetRows(force) {
    var root = liveRoot();
    var body = document.getElementById("fleet-rows");
    if (!root || root.dataset.live !== "fleet" || !body) { return; }
    var sort = root.dataset.sort || "limit";
    var rows = Array.prototype.slice.call(body.querySelectorAll("tr[id^='session-']"));
    var sorted = rows.slice().sort(function (a, b) {
      if (sort === "oldest") { return rowId(a) - rowId(b); }
      if (sort === "limit") {
        var d = rowDone(a) - rowDone(b) || rowFill(b) - rowFill(a);
        if (d !== 0) { return d; }
      }
      return rowId(b) - rowId(a);
    });
    var moved = sorted.some(function (tr, i) { return tr !== rows[i]; });
    if (moved && fleetOrderHeld() && force !== true) { showOrderState("pending"); return; }
    if (moved) { sorted.forEach(function (tr) { body.appendChild(tr); }); }
    showOrderState(fleetOrderHeld() ? "held" : "live");
  }
  document.addEventListener("htmx:wsAfterMessage", function () { sortFleetRows(false); });
  function holdFleetOrder(kind, on) {
    fleetHeld[kind] = on;
    if (fleetOrderHeld()) {
      var box = document.getElementById("fleet-order");
      if (box && box.dataset.order !== "pending") { showOrderState("held"); }
    } else {
      sortFleetRows(true);
    }
  }
  // A live row replaces the element that had the focus: the focus goes to the same control of the new row (a
  // keyboard user keeps their place, and the order stays held).
  var focusInSwap = null;
  function focusables(el) { return el.querySelectorAll("a[href], button, input, select, textarea, [tabindex]"); }
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    var target = evt.detail.target, active = document.activeElement;
    if (target && target.id && active && active !== target && target.contains(active)) {
      focusInSwap = { id: target.id, index: Array.prototype.indexOf.call(focusables(target), active) };
    }
  });
  document.addEventListener("htmx:oobAfterSwap", function () {
    if (!focusInSwap) { return; }
    var swapped = document.getElementById(focusInSwap.id), index = focusInSwap.index;
    focusInSwap = null;
    var again = swapped && index >= 0 ? focusables(swapped)[index] : null;
    if (again) { again.focus({ preventScroll: true }); }
  });
  document.addEventListener("DOMContentLoaded", function () {
    var table = document.getElementById("fleet-table");
    if (!table) { return; }
    table.addEventListener("pointerenter", function () { holdFleetOrder("pointer", true); });
    table.addEventListener("pointerleave", function () { holdFleetOrder("pointer", false); });
    table.addEventListener("focusin", function () { holdFleetOrder("focus", true); });
    table.addEventListener("focusout", function (evt) {
      if (!focusInSwap && !table.contains(evt.relatedTarget)) { holdFleetOrder("focus", false); }
    });
    var resort = document.getElementById("fleet-resort");
    if (resort) { resort.addEventListener("click", function () { sortFleetRows(true); }); }
  });

  // A fleet row for a session the page does not show yet (a new session joining the page: the server sends only
  // the page's rows): add it, in its place.
  document.addEventListener("htmx:oobErrorNoTarget", function (evt) {
    var content = evt.detail.content;
    if (content && content.dataset && content.dataset.liveDelete) { return; }
    var body = document.getElementById("fleet-rows");
    if (body && content && content.tagName === "TR" && /^session-\d+$/.test(content.id || "")) {
      var empty = body.querySelector("tr.empty");
      if (empty) { empty.remove(); }
      content.removeAttribute("hx-swap-oob");
      body.appendChild(content);
      htmx.process(content);
      sortFleetRows(false);
      return;
    }
    resync("unknown-target");
  });


  // Nothing refused in silence: a refused or failed request shows its reason where the user clicked. A fragment
  // answer (a form re-rendered with its error) is swapped as usual (htmx-config in base.html swaps 4xx/5xx); an
  // answer that cannot be swapped there (a whole error page, plain text, HX-Reswap: none, an hx-swap="none"
  // control) becomes a note inside the form or control that sent it.
  function reasonOf(xhr) {
    var type = xhr.getResponseHeader("Content-Type") || "";
    var body = xhr.responseText || "";
    if (type.indexOf("application/json") === 0) {
      try { var parsed = JSON.parse(body); if (parsed.error && parsed.error.message) { return parsed.error.message; } }
      catch (e) { /* fall through */ }
    }
    if (type.indexOf("text/plain") === 0 && body.trim()) { return body.trim().slice(0, 600); }
    var t = document.createElement("template");
    t.innerHTML = body;
    var reason = t.content.querySelector("[data-reason]");
    if (reason && reason.textContent.trim()) { return reason.textContent.trim(); }
    return "The server answered HTTP " + xhr.status + "; nothing changed.";
  }
  function hostOf(elt) { return (elt && elt.closest && (elt.closest("form") || elt)) || document.body; }
  function showRefusal(elt, text) {
    var host = hostOf(elt);
    var note = host.querySelector(".refusal");
    if (!note) {
      note = document.createElement("p");
      note.className = "note note--error refusal";
      note.setAttribute("role", "alert");
      host.appendChild(note);
    }
    note.textContent = text;
  }
  function swapStyle(elt) {
    var el = elt && elt.closest ? elt.closest("[hx-swap]") : null;
    return el ? el.getAttribute("hx-swap") : "";
  }
  document.addEventListener("htmx:beforeRequest", function (evt) {
    hostOf(evt.detail.elt).querySelectorAll(".refusal").forEach(function (n) { n.remove(); });
  });
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (!xhr || xhr.status < 400) { return; }
    var type = xhr.getResponseHeader("Content-Type") || "";
    var wholePage = /<html[\s>]/i.test(xhr.responseText || "");
    var noSwap = (xhr.getResponseHeader("HX-Reswap") || "") === "none" || swapStyle(evt.detail.elt) === "none";
    if (wholePage || noSwap || type.indexOf("text/html") !== 0) {
      evt.detail.shouldSwap = false;
      showRefusal(evt.detail.elt, reasonOf(xhr));
    }
  });
  document.addEventListener("htmx:sendError", function (evt) {
    showRefusal(evt.detail.elt, "Could not reach the server; nothing changed. Check the connection and try again.");
  });

  // A note about a click on "Compact now" ("started", "queued behind the turn", "running already") ends with the
  // compaction it speaks of: once the status shows a finished attempt other than the one shown when the note
  // appeared (any finished attempt, if one was in flight then), the note goes instead of contradicting the result.
  function statusBox() { return document.querySelector("#compaction-status [data-status]"); }
  function inFlight(box) { return box && (box.dataset.status === "queued" || box.dataset.status === "running"); }
  function dropEndedNotes() {
    var box = statusBox();
    document.querySelectorAll("[data-until-idle]").forEach(function (note) {
      if (note.dataset.seenAttempt === undefined) {
        note.dataset.seenAttempt = !box || inFlight(box) ? "*" : (box.dataset.attempt || "");
        return;
      }
      var seen = note.dataset.seenAttempt;
      if (box && !inFlight(box) && (seen === "*" || box.dataset.attempt !== seen)) { note.remove(); }
    });
  }
  document.addEventListener("htmx:afterSettle", dropEndedNotes);
  document.addEventListener("htmx:oobAfterSwap", dropEndedNotes);

  var opened = false;
  // 4013 "try again later" (the server's channel layer is down; Daphne cannot send 1013 itself): reconnect with
  // a growing, jittered delay, as the ws extension does on its own for 1006/1011/1012/1013.
  var TRY_AGAIN = 4013;
  var tryAgainCount = 0;
  document.addEventListener("htmx:wsOpen", function () {
    tryAgainCount = 0;
    setStatus("open");
    var root = liveRoot();
    // The fleet has no per-page seq: after any (re)connect, fetch the rows so nothing published before the
    // subscription is missed. The session page learns its seq from the hello message instead.
    if (root && root.dataset.live === "fleet") { resync(opened ? "reconnect" : "open"); }
    opened = true;
  });
  document.addEventListener("htmx:wsClose", function (evt) {
    var code = evt.detail && evt.detail.event ? evt.detail.event.code : 0;
    setStatus(code === 4401 || code === 4403 ? "refused" : "closed");
    var root = liveRoot();
    if (root) { root.dataset.closeCode = String(code); }
    var wrapper = evt.detail ? evt.detail.socketWrapper : null;
    if (code === TRY_AGAIN && wrapper && wrapper.reconnect) {
      var delay = Math.min(30000, 1000 * Math.pow(2, tryAgainCount)) * (0.5 + Math.random() / 2);
      tryAgainCount += 1;
      setTimeout(wrapper.reconnect, delay);
    }
  });
})();

// Skip links that name a control rather than a region (the fleet's "first run control"): focus the first match
// when there is one; without one, or without JavaScript, the link's own #target (the sessions table) is the answer.
(function () {
  "use strict";
  document.addEventListener("click", function (evt) {
    var link = evt.target.closest ? evt.target.closest("a[data-skip-to]") : null;
    if (!link) { return; }
    var target = document.querySelector(link.getAttribute("data-skip-to"));
    if (target) {
      evt.preventDefault();
      target.focus();
    }
  });
})();
