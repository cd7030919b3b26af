// strands-durable console: live parts of server-rendered pages. Everything shown comes
// from the server as escaped HTML, or is set with textContent here: never as markup.
"use strict";

function refresh(el) {
  // One read at a time per element, and one more if asked meanwhile: answers could
  // otherwise arrive out of order and an older page replace a newer one.
  if (el.dataset.busy) { el.dataset.again = "1"; return; }
  // Do not swap a form the user is typing into; try again once they leave it.
  if (el.contains(document.activeElement) && document.activeElement.form) {
    el.dataset.stale = "1";
    return;
  }
  el.dataset.busy = "1";
  fetch(el.dataset.refresh, {credentials: "same-origin"}).then(function (r) {
    if (r.ok) return r.text().then(function (html) { el.innerHTML = html; });
  }).catch(function () {}).then(function () {
    delete el.dataset.busy;
    if (el.dataset.again) { delete el.dataset.again; refresh(el); }
  });
}

function addEventRow(table, id, doc) {
  if (table.querySelector('tr[data-id="' + CSS.escape(id) + '"]')) return;
  var row = document.createElement("tr");
  row.dataset.id = id;
  var tool = doc.tool ? " " + doc.tool + " #" + doc.call + " " + (doc.outcome || "") : "";
  [doc.at, doc.type, doc.step, doc.attempt || "", doc.worker, (doc.detail || "") + tool]
    .forEach(function (text, i) {
      var cell = document.createElement("td");
      if (i === 0 || i === 2 || i === 4) cell.className = "mono";
      cell.textContent = String(text);
      row.appendChild(cell);
    });
  table.tBodies[0].appendChild(row);
}

function followSession(live) {
  var table = document.getElementById("events");
  var state = document.getElementById("feed-state");
  var source = new EventSource(live.dataset.feed);
  var pending = null;
  function soon() {
    if (pending) return;
    pending = setTimeout(function () { pending = null; refresh(live); }, 150);
  }
  source.onmessage = soon;
  // The event types come from the server (models.EventType), so none is missed.
  live.dataset.types.split(" ").forEach(function (type) {
    source.addEventListener(type, function (e) {
      addEventRow(table, e.lastEventId, JSON.parse(e.data));
      soon();
    });
  });
  source.addEventListener("end", function (e) {
    source.close();
    state.textContent = "(session " + JSON.parse(e.data).status + ")";
    refresh(live);
  });
  live.addEventListener("focusout", function () {
    if (live.dataset.stale) { delete live.dataset.stale; setTimeout(function () { refresh(live); }, 0); }
  });
}

document.addEventListener("DOMContentLoaded", function () {
  var live = document.getElementById("live");
  if (live && live.dataset.feed) followSession(live);
  var counts = document.getElementById("counts");
  if (counts) setInterval(function () { refresh(counts); }, 3000);
});
