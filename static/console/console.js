/* Live updates for the console, from the SSE stream that htmx's sse extension opens on
   <body sse-connect>. No polling: every change on screen follows an event.

   - stats.updated: the numbers in [data-stat] are set from the event itself.
   - job.*: panels marked [data-live-refresh] (and [data-live-job] for that job) re-fetch
     their fragment, at most once per REFRESH_MS; ledger rows are re-fetched by id; new jobs
     are prepended to a ledger showing the newest first; the log feed gets a line.
*/
(function () {
  "use strict";

  var JOB_EVENTS = [
    "job.created", "job.started", "job.completed", "job.failed",
    "job.cancelled", "job.retry_scheduled", "job.dlq_entry"
  ];
  var REFRESH_MS = 400;
  var FEED_MAX = 60;
  var timers = new Map();

  function refreshSoon(elt) {
    // Trailing throttle: a burst of events costs one request, and the last state is shown.
    if (timers.has(elt)) return;
    timers.set(elt, window.setTimeout(function () {
      timers.delete(elt);
      if (document.body.contains(elt)) htmx.trigger(elt, "console:refresh");
    }, REFRESH_MS));
  }

  function flash(elt) {
    elt.classList.remove("changed");
    void elt.offsetWidth;
    elt.classList.add("changed");
  }

  function onStats(stats) {
    document.querySelectorAll("[data-stat]").forEach(function (elt) {
      var value = stats[elt.dataset.stat];
      if (value === undefined || elt.textContent === String(value)) return;
      elt.textContent = String(value);
      flash(elt);
    });
  }

  // The display states (jobs/display.py), rendered into the page by {% display_states_script %}:
  // which row each stands for, its label, and the actions it allows.
  var statesElt = document.getElementById("display-states");
  var STATES = statesElt ? JSON.parse(statesElt.textContent) : {};

  function displayState(job) {
    // A job event carries no count of unfinished upstream jobs: blocked only when it says so.
    var blocked = job.status === "pending" && Boolean(job.pending_dependencies);
    var names = Object.keys(STATES);
    for (var i = 0; i < names.length; i++) {
      var row = STATES[names[i]];
      // Nor whether its queue is paused: an event's pending job shows as pending.
      if (row.status === job.status && row.in_dlq === Boolean(job.in_dlq) && row.blocked === blocked &&
          !row.paused) {
        return names[i];
      }
    }
    return job.status;
  }

  var clock = null;
  function formatTime(iso) {
    if (!clock) {
      var options = { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false };
      try {
        clock = new Intl.DateTimeFormat("en-GB", Object.assign({ timeZone: document.body.dataset.tz }, options));
      } catch (e) {
        clock = new Intl.DateTimeFormat("en-GB", options);
      }
    }
    return clock.format(iso ? new Date(iso) : new Date());
  }

  function addFeedLine(type, job) {
    var feed = document.querySelector("[data-log-feed]");
    var template = document.getElementById("log-line-template");
    if (!feed || !template) return;
    var line = template.content.firstElementChild.cloneNode(true);
    var state = displayState(job);
    var time = line.querySelector(".feed-time");
    time.textContent = formatTime(job.updated_at);
    time.setAttribute("datetime", job.updated_at || "");
    var pill = line.querySelector(".pill");
    pill.classList.add("pill-" + state);
    pill.textContent = STATES[state] ? STATES[state].label : state;
    var link = line.querySelector(".feed-job");
    link.textContent = job.type;
    link.href = "/jobs/" + job.id;
    // The id's random end, as jobs.representation.short_id shows it.
    line.querySelector(".feed-id").textContent = job.id.slice(-8);
    var detail = type;
    if ((state === "dlq" || state === "retrying") && job.last_error) detail += " · " + job.last_error;
    line.querySelector(".feed-detail").textContent = detail;
    line.classList.add("row-new");
    var empty = feed.querySelector(".feed-empty");
    if (empty) empty.remove();
    feed.insertBefore(line, feed.firstChild);
    while (feed.children.length > FEED_MAX) feed.lastElementChild.remove();
  }

  function updateLedger(type, job) {
    var row = document.getElementById("job-" + job.id);
    if (row && row.dataset.rowUrl) {
      htmx.ajax("GET", row.dataset.rowUrl, { target: row, swap: "outerHTML" });
      return;
    }
    var body = document.querySelector("[data-live-prepend]");
    if (type !== "job.created" || !body || row) return;
    // The server answers 204 when the new job does not pass this ledger's filters.
    var query = window.location.search ? "&" + window.location.search.slice(1) : "";
    htmx.ajax("GET", "/jobs/" + job.id + "/row?match=1" + query, { target: body, swap: "afterbegin" })
      .then(function () {
        var added = document.getElementById("job-" + job.id);
        if (added) added.classList.add("row-new");
        var limit = parseInt(body.dataset.pageSize || "0", 10);
        while (limit && body.children.length > limit) body.lastElementChild.remove();
      });
  }

  function onJob(type, job) {
    document.querySelectorAll("[data-live-refresh]").forEach(refreshSoon);
    document.querySelectorAll('[data-live-job="' + job.id + '"]').forEach(refreshSoon);
    updateLedger(type, job);
    addFeedLine(type, job);
  }

  function setLive(state, text) {
    var live = document.getElementById("live");
    if (!live) return;
    live.dataset.state = state;
    live.querySelector(".live-text").textContent = text;
  }

  function bind(source) {
    if (source.consoleBound) return;
    source.consoleBound = true;
    source.addEventListener("stats.updated", function (event) {
      // The server sends one right after it subscribed for this client: from here on,
      // nothing is missed, so this (not the socket opening) is when the page is live.
      setLive("open", "Live");
      onStats(JSON.parse(event.data));
    });
    source.addEventListener("stream.status", function (event) {
      // Redis went away behind the server: the page is stale until it says "up" again.
      var down = JSON.parse(event.data).redis === "down";
      setLive(down ? "closed" : "open", down ? "Events paused" : "Live");
    });
    JOB_EVENTS.forEach(function (type) {
      source.addEventListener(type, function (event) {
        onJob(type, JSON.parse(event.data));
      });
    });
  }

  // Filter forms send only the fields that are set, so ledger URLs stay short and shareable.
  document.addEventListener("formdata", function (event) {
    if (!event.target.hasAttribute("data-drop-empty")) return;
    Array.from(event.formData.keys()).forEach(function (key) {
      if (event.formData.getAll(key).every(function (value) { return value === ""; })) {
        event.formData.delete(key);
      }
    });
  });

  document.addEventListener("htmx:sseOpen", function (event) {
    bind(event.detail.source);
  });
  document.addEventListener("htmx:sseError", function () {
    setLive("closed", "Reconnecting");
  });
})();
