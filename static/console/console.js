/* Live updates for the console, from the SSE stream that htmx's sse extension opens on
   <body sse-connect>. Every change on screen follows an event, but for what no event
   tells: a panel marked [data-read-every] (node health: heartbeats, and their stopping, are
   no event) is read again on that timer too, while the page is in sight.

   - stats.updated: the numbers in [data-stat] are set from the event itself. The first one
     of each connection, and the one after Redis is back, also re-fetches once everything
     below: events sent before the stream subscribed, or while it was away, were missed.
   - job.*: panels marked [data-live-refresh] (and [data-live-job] for that job) re-fetch
     their fragment, at most once per REFRESH_MS; the ledger's rows, with its count and
     pager, are read again from its own page, one request for all the events of an animation
     frame, when the event's job is on it or may now be (a creation; any event under a
     filter a job moves in and out of, [data-live-moves]); the log feed gets a line. A
     catch-up also merges the log's lines from the server.
   - The DLQ page ([data-live-dlq-rows]) is read again from its own page when a job enters
     the DLQ or fails an attempt (its charts), when a job it lists changes, and when the
     DLQ's count moves (a purge sends no event of the jobs it deletes).
   - Keyboard focus on something a refresh replaces moves to its counterpart in the new
     content, rather than falling to <body>.
   - A stream refused for good (401: the session ended elsewhere) is not retried: the page
     says so, with a link to log in again.
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
      read(elt);
    }, REFRESH_MS));
  }

  function read(elt) {
    if (!document.body.contains(elt)) return;
    htmx.trigger(elt, "console:refresh");
    readLater(elt);
  }

  // The timer of a [data-read-every] panel counts from its last read, whatever asked for
  // it: under traffic, events read it often enough, and the timer adds no request. Due
  // while the page is out of sight, it is read when the page is back.
  var readTimers = new Map();
  var readWhenSeen = new Set();

  function readLater(elt) {
    var every = parseInt(elt.dataset.readEvery || "", 10);
    if (!every) return;
    window.clearTimeout(readTimers.get(elt));
    readTimers.set(elt, window.setTimeout(function () {
      // A page signed out stays as it is, saying so; a read on its way restarts the timer.
      if (sessionEnded || timers.has(elt)) return;
      if (document.hidden) readWhenSeen.add(elt);
      else read(elt);
    }, every));
  }

  document.querySelectorAll("[data-read-every]").forEach(readLater);
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) return;
    readWhenSeen.forEach(read);
    readWhenSeen.clear();
  });

  // Keyboard focus on something a refresh replaces fell to <body>, and the reader's place
  // with it: it goes to the same control in what replaced it (the same id, address or
  // form, and text; a link or a named control whatever its text), else to the refreshed
  // region itself, or its first link, so that Tab goes on from there.
  function focusedIn(region) {
    var focused = document.activeElement;
    return focused && focused !== document.body && region.contains(focused) ? focused : null;
  }

  function controlKey(elt) {
    var form = elt.closest("form");
    return [elt.tagName, elt.id, elt.getAttribute("href"), elt.getAttribute("name"),
      form && form.getAttribute("action")].join(" ");
  }

  function refocus(focused, region) {
    if (!focused || focused.isConnected || focusedIn(region)) return;
    var key = controlKey(focused);
    var text = focused.textContent.trim();
    var twins = Array.from(region.querySelectorAll(focused.tagName)).filter(function (elt) {
      return controlKey(elt) === key;
    });
    var named = focused.id || focused.hasAttribute("href") || focused.hasAttribute("name");
    var twin = twins.find(function (elt) { return elt.textContent.trim() === text; }) ||
      (named ? twins[0] : null) ||
      (region.hasAttribute("tabindex") ? region : region.querySelector("a[href]"));
    if (twin) twin.focus({ preventScroll: true });
  }

  function replaceKeepingFocus(shown, fresh) {
    var focused = focusedIn(shown);
    shown.replaceWith(fresh);
    refocus(focused, fresh);
  }

  // What had keyboard focus in each region a refresh is swapping in.
  var swapping = new Map();

  // A refresh whose answer reads as the page already does is not swapped in: the catch-up
  // after each (re)connection re-reads every live panel, and swapping an unchanged one
  // closed what the reader had opened (a stack trace) and detached what they pointed at.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    var asked = detail.requestConfig && detail.requestConfig.triggeringEvent;
    if (!asked || asked.type !== "console:refresh" || detail.isError || !detail.shouldSwap) return;
    var answer = document.createElement("template");
    answer.innerHTML = detail.serverResponse;
    var selector = detail.elt.getAttribute("hx-select");
    var parts = selector ? Array.from(answer.content.querySelectorAll(selector)) : [answer.content];
    var text = parts.map(function (part) { return part.textContent; }).join("");
    if (readsAs(text, detail.target.textContent)) detail.shouldSwap = false;
    else swapping.set(detail.target, focusedIn(detail.target));
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var region = event.detail.target;
    if (!swapping.has(region)) return;
    var focused = swapping.get(region);
    swapping.delete(region);
    refocus(focused, region);
  });

  function readsAs(one, other) {
    return one.replace(/\s+/g, "") === other.replace(/\s+/g, "");
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

  // Bidirectional controls, which make a line read as other text ("\u202eevil" reads
  // "live"): the code points of jobs/display.py's _BIDI_CONTROLS, each shown as its \uXXXX
  // escape as reveal_bidi shows it. One rule in two languages: test_browser.py compares them.
  var BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

  function revealBidi(text) {
    return text.replace(BIDI_CONTROLS, function (control) {
      return "\\u" + control.charCodeAt(0).toString(16).padStart(4, "0");
    });
  }

  function addFeedLine(type, job) {
    var feed = document.querySelector("[data-log-feed]");
    var template = document.getElementById("log-line-template");
    if (!feed || !template) return;
    var line = template.content.firstElementChild.cloneNode(true);
    line.dataset.job = job.id;
    line.dataset.event = type;
    var state = displayState(job);
    var time = line.querySelector(".feed-time");
    time.textContent = formatTime(job.updated_at);
    time.setAttribute("datetime", job.updated_at || "");
    var pill = line.querySelector(".pill");
    pill.classList.add("pill-" + state);
    pill.textContent = STATES[state] ? STATES[state].label : state;
    var link = line.querySelector(".feed-job");
    link.textContent = revealBidi(job.type);
    link.href = "/jobs/" + job.id;
    // The id's random end, as jobs.representation.short_id shows it.
    line.querySelector(".feed-id").textContent = job.id.slice(-8);
    var detail = type;
    if ((state === "dlq" || state === "retrying") && job.last_error) {
      detail += " · " + revealBidi(job.last_error);
    }
    line.querySelector(".feed-detail").textContent = detail;
    // A catch-up may have read this line from the server before its event arrived.
    if (feedKeys(feed).has(feedKey(line))) return;
    showFeedLine(feed, line, feed.firstChild);
  }

  function showFeedLine(feed, line, next) {
    line.classList.add("row-new");
    var empty = feed.querySelector(".feed-empty");
    if (empty) empty.remove();
    feed.insertBefore(line, next);
    while (feed.children.length > FEED_MAX) feed.lastElementChild.remove();
  }

  // A line is an event of a job at the job's time of it. The server writes that time to the
  // microsecond, an event to the millisecond, and both are cut to the millisecond when read.
  function feedTime(line) {
    return Date.parse(line.querySelector(".feed-time").getAttribute("datetime"));
  }

  function feedKey(line) {
    return line.dataset.job + " " + line.dataset.event + " " + feedTime(line);
  }

  function feedKeys(feed) {
    return new Set(Array.from(feed.querySelectorAll(".feed-line"), feedKey));
  }

  // The log's lines as a fresh load shows them (the latest change of each recently changed
  // job), merged into those shown: a line the page lacks goes in by its time, newest first,
  // and the lines it has stay, some of them events the server's history no longer names.
  // Kept behind after a failed read, it is read again at the next event.
  var feedBehind = false;

  function catchUpFeed() {
    var feed = document.querySelector("[data-log-feed]");
    if (!feed) return;
    feedBehind = false;
    fetchHtml(feed.dataset.linesFrom).then(function (page) {
      var fresh = page.querySelector("[data-log-feed]");
      if (!fresh) throw new Error("The page has no log");
      mergeFeedLines(feed, fresh);
    }).catch(function () {
      feedBehind = true;
    });
  }

  function mergeFeedLines(feed, fresh) {
    var shown = feedKeys(feed);
    fresh.querySelectorAll(".feed-line").forEach(function (line) {
      if (shown.has(feedKey(line))) return;
      var at = feedTime(line);
      var next = Array.from(feed.querySelectorAll(".feed-line")).find(function (other) {
        return feedTime(other) < at;
      });
      showFeedLine(feed, line, next || null);
    });
  }

  // The ledger's rows are read again from the ledger's own page (its filters, its page,
  // its order): one request for all the changes of an animation frame, and one more for
  // those that come while it loads, however long the burst. A request per row, each locked
  // on document.body by htmx, whose queue keeps only the last one waiting, lost all but
  // one or two of them.
  // `others`: jobs the page does not show changed, so that its count may be another, and
  // on a page that takes new rows ([data-live-prepend]) some may now belong there.
  var ledger = { changed: new Set(), others: false, scheduled: false, loading: false };

  function ledgerBody() {
    return document.querySelector("[data-live-rows]");
  }

  function jobIdOf(row) {
    return row.id.slice("job-".length);
  }

  function ledgerRow(body, id) {
    var row = document.getElementById("job-" + id);
    return row && row.parentElement === body ? row : null;
  }

  function noteLedgerChange(type, job) {
    var body = ledgerBody();
    if (!body) return;
    if (ledgerRow(body, job.id)) {
      ledger.changed.add(job.id);
    } else if (type === "job.created" || body.hasAttribute("data-live-moves")) {
      ledger.others = true;
    } else {
      return;
    }
    refreshLedgerSoon();
  }

  function refreshLedgerSoon() {
    // Changes noted while a refresh loads wait for it: what it reads may be older than them.
    if (ledger.scheduled || ledger.loading) return;
    ledger.scheduled = true;
    window.requestAnimationFrame(refreshLedger);
  }

  function refreshLedger() {
    var body = ledgerBody();
    var changed = ledger.changed;
    var others = ledger.others;
    ledger.scheduled = false;
    ledger.changed = new Set();
    ledger.others = false;
    ledger.loading = true;
    fetchHtml(window.location.pathname + window.location.search)
      .then(function (page) {
        var rows = page.getElementById("ledger-rows");
        if (!rows) throw new Error("The ledger's page has no rows");
        mergeAroundRows(page);
        var arrived = others && body.hasAttribute("data-live-prepend");
        return mergeLedgerRows(body, rows, changed, arrived);
      })
      .then(function () {
        ledger.loading = false;
        if (ledger.changed.size || ledger.others) refreshLedgerSoon();
      }, function () {
        // Kept for the next event, or the catch-up after a reconnection, rather than asked
        // again and again of a server that fails.
        changed.forEach(function (id) { ledger.changed.add(id); });
        ledger.others = ledger.others || others;
        ledger.loading = false;
      });
  }

  function fetchHtml(url) {
    // A signed-out request is redirected to the login page: a failure here, and the
    // stream's refusal tells the user.
    return fetch(url, { redirect: "error" }).then(function (response) {
      if (!response.ok) throw new Error(url + " answered " + response.status);
      return response.text();
    }).then(function (html) {
      // A <template> parses a lone <tr> as a table would; a whole page parses as well.
      var parsed = document.createElement("template");
      parsed.innerHTML = html;
      return parsed.content;
    });
  }

  // Whether a row says the same as before. Its markup differs anyway: each rendering masks
  // its CSRF tokens anew, and the user may have opened its confirmation.
  function sameRow(shown, fresh) {
    return shown.textContent === fresh.textContent;
  }

  // What the ledger says of its rows ([data-live-with-rows]: their count, the pager, the bulk
  // buttons' count, "No job matches"; and the DLQ's groups and charts) is taken from the same
  // page as the rows: kept from the page's load, it said "10 jobs" and one page over rows
  // that were twelve.
  function mergeAroundRows(page) {
    document.querySelectorAll("[data-live-with-rows]").forEach(function (shown) {
      var fresh = page.getElementById(shown.id);
      if (!fresh || fresh.innerHTML === shown.innerHTML) return;
      replaceKeepingFocus(shown, fresh);
    });
  }

  function mergeLedgerRows(body, fresh, changed, arrived) {
    // Rows that did not change stay as they are (an open confirmation, a message in place).
    // From the page's end, `next` is the row on screen that the one at hand comes before.
    var rows = Array.from(fresh.children);
    var next = null;
    for (var i = rows.length - 1; i >= 0; i--) {
      var row = rows[i];
      var id = jobIdOf(row);
      var shown = ledgerRow(body, id);
      if (shown) {
        // Found on the page, so not one of those read alone below.
        var stale = changed.delete(id);
        if (!stale || sameRow(shown, row)) {
          next = shown;
          continue;
        }
        replaceKeepingFocus(shown, row);
      } else if (arrived) {
        body.insertBefore(row, next);
        row.classList.add("row-new");
      } else {
        continue;
      }
      htmx.process(row);
      next = row;
    }
    var limit = parseInt(body.dataset.pageSize || "0", 10);
    while (arrived && limit && body.children.length > limit) body.lastElementChild.remove();
    // The page no longer has these (they left its filters, or were purged): each row is
    // read alone, and shows what became of its job.
    return Promise.all(Array.from(changed, function (id) {
      var row = ledgerRow(body, id);
      return row && fetchHtml(row.dataset.rowUrl).then(function (answer) {
        var fresh = answer.firstElementChild;
        var shown = ledgerRow(body, id);
        if (!shown) return;
        replaceKeepingFocus(shown, fresh);
        htmx.process(fresh);
      });
    }));
  }

  // The DLQ page's rows are those of its page as read again: a row that reads as before
  // stays as it is (its tick, keyboard focus), a row that left goes. Until this, nothing of
  // the page but the nav's badge followed the DLQ. At most one read is on its way, and
  // the changes meanwhile make one more.
  var dlq = { timer: null, loading: false, again: false, count: null };

  function dlqBody() {
    return document.querySelector("[data-live-dlq-rows]");
  }

  function noteDlqChange(type, job) {
    var body = dlqBody();
    if (body && (type === "job.dlq_entry" || type === "job.failed" || ledgerRow(body, job.id))) {
      refreshDlqSoon();
    }
  }

  function noteDlqCount(count) {
    if (dlq.count !== null && count !== dlq.count) refreshDlqSoon();
    dlq.count = count;
  }

  function refreshDlqSoon() {
    if (!dlqBody()) return;
    if (dlq.loading) {
      dlq.again = true;
    } else if (!dlq.timer) {
      dlq.timer = window.setTimeout(refreshDlq, REFRESH_MS);
    }
  }

  function refreshDlq() {
    dlq.timer = null;
    dlq.loading = true;
    fetchHtml(window.location.pathname + window.location.search).then(function (page) {
      var rows = page.getElementById(dlqBody().id);
      if (!rows) throw new Error("The DLQ's page has no rows");
      mergeAroundRows(page);
      mergeDlqRows(dlqBody(), rows);
    }).catch(function () {
      // Read again at the next change, or the catch-up after a reconnection.
    }).then(function () {
      dlq.loading = false;
      if (dlq.again) {
        dlq.again = false;
        refreshDlqSoon();
      }
    });
  }

  function mergeDlqRows(body, fresh) {
    var focused = focusedIn(body);
    var rows = Array.from(fresh.children).map(function (row) {
      var shown = ledgerRow(body, jobIdOf(row));
      return shown && sameRow(shown, row) ? shown : row;
    });
    var kept = new Set(rows);
    Array.from(body.children).forEach(function (row) {
      if (!kept.has(row)) row.remove();
    });
    var next = body.firstElementChild;
    rows.forEach(function (row) {
      if (row === next) {
        next = next.nextElementSibling;
        return;
      }
      if (!row.isConnected) row.classList.add("row-new");
      body.insertBefore(row, next);
    });
    refocus(focused, body);
  }

  function onJob(type, job) {
    document.querySelectorAll("[data-live-refresh]").forEach(refreshSoon);
    document.querySelectorAll('[data-live-job="' + job.id + '"]').forEach(refreshSoon);
    noteLedgerChange(type, job);
    noteDlqChange(type, job);
    addFeedLine(type, job);
    if (feedBehind) catchUpFeed();
  }

  // Whether events may have been missed: until the stream's first stats.updated (the page
  // was rendered before it subscribed), and from a lost connection, or Redis lost behind
  // the server, until the stats.updated that follows.
  var missed = true;

  function catchUp() {
    missed = false;
    document.querySelectorAll("[data-live-refresh], [data-live-job]").forEach(refreshSoon);
    catchUpFeed();
    refreshDlqSoon();
    var body = ledgerBody();
    if (!body) return;
    Array.from(body.children).forEach(function (row) { ledger.changed.add(jobIdOf(row)); });
    ledger.others = true;
    refreshLedgerSoon();
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
      var stats = JSON.parse(event.data);
      onStats(stats);
      noteDlqCount(stats.dlq);
      if (missed) catchUp();
    });
    source.addEventListener("stream.status", function (event) {
      // Redis went away behind the server: the page is stale until it says "up" again,
      // and the stats.updated after that.
      var down = JSON.parse(event.data).redis === "down";
      if (down) missed = true;
      setLive(down ? "closed" : "open", down ? "Events paused" : "Live");
    });
    JOB_EVENTS.forEach(function (type) {
      source.addEventListener(type, function (event) {
        onJob(type, JSON.parse(event.data));
      });
    });
  }

  var sessionEnded = false;

  function checkSession(url) {
    // EventSource does not say why it gave up (a 401, or a 502 from a proxy while the
    // server restarts), so the stream is asked once more, and left at its headers.
    var asking = new AbortController();
    fetch(url, { signal: asking.signal }).then(function (response) {
      asking.abort();
      if (response.status === 401) endSession();
    }, function () {
      // The server is unreachable: htmx goes on retrying.
    });
  }

  function endSession() {
    // Both of two refusals in a row may be checked.
    if (sessionEnded) return;
    sessionEnded = true;
    // htmx reconnects only while the element names its stream.
    document.body.removeAttribute("sse-connect");
    setLive("closed", "Signed out");
    var notice = document.getElementById("session-ended-template").content.firstElementChild;
    var login = notice.querySelector("a");
    var next = new URLSearchParams({ next: window.location.pathname + window.location.search });
    login.href = login.getAttribute("href") + "?" + next;
    document.getElementById("main").prepend(notice);
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
  document.addEventListener("htmx:sseError", function (event) {
    if (sessionEnded) return;
    missed = true;
    setLive("closed", "Reconnecting");
    // Closed rather than reconnecting: the server refused the stream.
    var source = event.detail.source;
    if (source.readyState === EventSource.CLOSED) checkSession(source.url);
  });
})();
