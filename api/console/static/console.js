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
    if (r.ok) return r.text().then(function (html) {
      // The user may have begun typing while this was read: keep their form as it is,
      // and read again once they leave it.
      if (el.contains(document.activeElement) && document.activeElement.form) {
        el.dataset.stale = "1";
        return;
      }
      // A form the user opened stays open: the new HTML has every <details> closed.
      var open = Array.prototype.map.call(el.querySelectorAll("details[open][id]"),
                                          function (d) { return d.id; });
      el.innerHTML = html;
      open.forEach(function (id) {
        var d = document.getElementById(id);
        if (d && el.contains(d)) d.open = true;
      });
    });
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

function followModelOutput(box) {
  // One block per run of a step (its `attempt` entry): a heading, then the text as it
  // comes. Text only ever goes in with textContent.
  var source = new EventSource(box.dataset.feed);
  var state = document.getElementById("output-state");
  var current = {};  // step -> the <pre> its latest run writes into
  function block(d) {
    var empty = document.getElementById("output-empty");
    if (empty) empty.remove();
    var head = document.createElement("h3");
    head.textContent = d.step + " · " + d.agent + " · attempt " + d.attempt +
      (d.worker ? " on " + d.worker : "") +
      (d.replayed ? " · " + d.replayed + " turn(s) replayed from its journal" : "");
    var pre = document.createElement("pre");
    pre.className = "model-text";
    pre.dataset.step = d.step;
    box.appendChild(head);
    box.appendChild(pre);
    current[d.step] = pre;
    return pre;
  }
  function target(d) { return current[d.step] || block(d); }
  source.addEventListener("attempt", function (e) { block(JSON.parse(e.data)); });
  source.addEventListener("text", function (e) {
    var d = JSON.parse(e.data);
    target(d).appendChild(document.createTextNode(d.text));
  });
  source.addEventListener("tool", function (e) {
    var d = JSON.parse(e.data);
    target(d).appendChild(document.createTextNode("\n[tool: " + d.tool + "]\n"));
  });
  source.addEventListener("turn_end", function (e) {
    target(JSON.parse(e.data)).appendChild(document.createTextNode("\n"));
  });
  source.addEventListener("end", function () {
    source.close();
    state.textContent = "(session ended; the committed results are in the timeline)";
  });
}

document.addEventListener("DOMContentLoaded", function () {
  var live = document.getElementById("live");
  if (live && live.dataset.feed) followSession(live);
  var output = document.getElementById("model-output");
  if (output && output.dataset.feed) followModelOutput(output);
  var counts = document.getElementById("counts");
  if (counts) setInterval(function () { refresh(counts); }, 3000);
});
