// agent-tail.js follows an agent session's live tail on the session page (progressive
// enhancement: without it, the page's "Refresh" link shows new events). The list #events
// names its stream in data-tail (/agents/{session}/events?after=N); each server-sent event is
// {seq, kind, at, summary} (with state, turn and spend when the summary above the log changes)
// with the sequence number as its id, so the browser's reconnection
// resumes after the last event received (Last-Event-ID). "end" says the session has ended.
(function () {
  "use strict";
  var list = document.getElementById("events");
  var status = document.getElementById("tail-status");
  if (!list || !list.dataset.tail || typeof EventSource === "undefined") {
    return;
  }
  var last = 0;
  list.querySelectorAll("li[value]").forEach(function (li) {
    last = Math.max(last, Number(li.getAttribute("value")));
  });
  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }
  // The page's forms (Send, Stop) and its "Stopping…" line were rendered for the state the
  // session was in then: once it is stopping its forms would change nothing, and once it has
  // ended neither applies.
  function dropForms() {
    document.querySelectorAll('main form[action$="/message"], main form[action$="/stop"]').forEach(function (form) {
      form.remove();
    });
  }
  function ended() {
    dropForms();
    var stopping = document.getElementById("session-stopping");
    if (stopping) {
      stopping.remove();
    }
  }
  function when(iso) {
    // As the server writes it: 2006-01-02 15:04:05 UTC.
    return iso.slice(0, 10) + " " + iso.slice(11, 19) + " UTC";
  }
  var source = new EventSource(list.dataset.tail);
  source.onopen = function () {
    say("Following live.");
  };
  source.onmessage = function (msg) {
    var e;
    try {
      e = JSON.parse(msg.data);
    } catch (err) {
      return;
    }
    if (typeof e.seq !== "number" || e.seq <= last) {
      return; // already shown
    }
    last = e.seq;
    var none = list.querySelector("li.none");
    if (none) {
      none.remove();
    }
    var li = document.createElement("li");
    li.value = e.seq;
    var time = document.createElement("time");
    time.dateTime = e.at;
    time.textContent = when(e.at);
    var kind = document.createElement("span");
    kind.className = "kind";
    kind.textContent = e.kind;
    var summary = document.createElement("span");
    summary.className = "summary";
    summary.textContent = e.summary;
    li.append(time, " ", kind, " ", summary);
    list.append(li);
    // The summary above the log follows too: the state, and the turns taken.
    if (e.state) {
      var state = document.getElementById("session-state");
      if (state) {
        state.textContent = e.state;
      }
    }
    if (e.ended) {
      ended();
    } else if (e.stopping) {
      dropForms();
    }
    if (e.turn) {
      var turns = document.getElementById("session-turns");
      if (turns) {
        turns.textContent = turns.textContent.replace(/^\d+/, String(e.turn));
      }
    }
    // A model call's event brings the session's spend, written as the server writes money.
    if (e.spend) {
      var spend = document.querySelector("#session-spend .money");
      if (spend) {
        spend.textContent = e.spend;
        if (e.spend_exact) {
          spend.title = e.spend_exact;
        } else {
          spend.removeAttribute("title");
        }
      }
    }
  };
  source.addEventListener("end", function () {
    source.close();
    ended();
    say("The session has ended. Refresh for its final state.");
  });
  source.onerror = function () {
    if (source.readyState === EventSource.CONNECTING) {
      say("Reconnecting…");
    } else {
      say("Live updates stopped. Use Refresh.");
    }
  };
})();
