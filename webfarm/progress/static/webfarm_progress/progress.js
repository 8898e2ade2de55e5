/*
 * Live progress bars. Every element with data-progress-url becomes a bar that
 * polls its URL until the job reaches a final state. No build step, no
 * dependencies; any number of bars per page.
 *
 * Polling is poller.js's (webfarm.poll): fast while the job moves, slower
 * while it doesn't, back-off on errors, Retry-After, paused while the tab is
 * hidden; it stops at a final state.
 */
(function () {
  "use strict";

  var FINAL = { succeeded: 1, failed: 1, cancelled: 1, lost: 1 };
  var STATES = { queued: 1, running: 1, succeeded: 1, failed: 1, cancelled: 1, lost: 1 };
  var JOB_ID = /^[A-Za-z0-9_-]{22}$/;
  // A download is a path on this site: never another origin, never javascript:.
  var SITE_PATH = /^\/(?![\/\\])[A-Za-z0-9\/_.~%-]*$/;

  // nginx serves the document as memcached holds it, and anyone who can reach
  // memcached can write it: believe only the shape this site publishes, for
  // this bar's job. Anything else is null (polled again, as after an error).
  function checked(data, job) {
    if (!data || typeof data !== "object" || data.job !== job || !STATES[data.state]) return null;
    function number(v, low, high) {
      return typeof v === "number" && isFinite(v) && v >= low && v <= high ? v : null;
    }
    function text(v) { return typeof v === "string" ? v.slice(0, 10000) : ""; }
    function time(v) { return typeof v === "string" && !isNaN(Date.parse(v)) ? v : null; }
    var parts = null;
    if (data.parts && typeof data.parts === "object") {
      parts = {
        total: number(data.parts.total, 1, 64) || 1,
        queued: number(data.parts.queued, 0, 64) || 0,
        running: number(data.parts.running, 0, 64) || 0,
        done: number(data.parts.done, 0, 64) || 0,
        workers: Array.isArray(data.parts.workers) ? data.parts.workers.slice(0, 8).map(text) : [],
      };
    }
    return {
      job: data.job,
      state: data.state,
      title: text(data.title),
      current: number(data.current, 0, Number.MAX_SAFE_INTEGER) || 0,
      total: number(data.total, 0, Number.MAX_SAFE_INTEGER),
      percent: number(data.percent, 0, 100),
      stage: text(data.stage),
      message: text(data.message),
      eta_seconds: number(data.eta_seconds, 0, Number.MAX_VALUE),
      created_at: time(data.created_at),
      started_at: time(data.started_at),
      updated_at: text(data.updated_at),  // only compared (poller.js): a new one is a new document
      finished_at: time(data.finished_at),
      result_url: typeof data.result_url === "string" && SITE_PATH.test(data.result_url) ? data.result_url : null,
      error: text(data.error),
      cancel_requested: data.cancel_requested === true,
      attempt: number(data.attempt, 1, 1000) || 1,
      retried_as: typeof data.retried_as === "string" && JOB_ID.test(data.retried_as) ? data.retried_as : null,
      parts: parts,
      final: !!FINAL[data.state],
    };
  }

  // The job a progress URL is about: /progress/<job>/[<token>/].
  function jobOf(url) {
    var match = /\/progress\/([A-Za-z0-9_-]{22})\//.exec(url);
    return match ? match[1] : null;
  }
  var MIN_DELAY = 500, IDLE_MAX = 5000, ERROR_MAX = 30000;

  function formatEta(seconds) {
    if (seconds === null || seconds === undefined) return "";
    if (seconds < 60) return "about " + Math.max(1, Math.round(seconds)) + " s left";
    if (seconds < 3600) return "about " + Math.round(seconds / 60) + " min left";
    return "about " + (seconds / 3600).toFixed(1) + " h left";
  }

  function duration(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return seconds + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min " + (seconds % 60) + " s";
    return Math.floor(seconds / 3600) + " h " + Math.round((seconds % 3600) / 60) + " min";
  }

  // How long it has run (this browser's clock: clamped, never negative), or took.
  function formatElapsed(data) {
    var started = data.started_at ? Date.parse(data.started_at) : NaN;
    if (isNaN(started)) return "";
    var ended = data.finished_at ? Date.parse(data.finished_at) : NaN;
    if (!isNaN(ended)) return "took " + duration((ended - started) / 1000);
    return FINAL[data.state] ? "" : "running for " + duration((Date.now() - started) / 1000);
  }

  // A job split in parts: how many run, wait, and where (the widget's parts_line says the same).
  function partsLine(data) {
    var parts = data.parts;
    if (!parts) return "";
    if (data.state === "succeeded") return "Ran in " + parts.total + (parts.total === 1 ? " part." : " parts.");
    if (FINAL[data.state]) return parts.done + " of " + parts.total + " parts had finished.";
    var line = "Parts: " + parts.done + " of " + parts.total + " done";
    if (parts.running) line += ", " + parts.running + " running";
    if (parts.queued) line += ", " + parts.queued + " waiting for a worker";
    if (parts.workers && parts.workers.length) line += " · on " + parts.workers.join(", ");
    return line;
  }

  function csrfToken(form) {
    var input = form && form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function Bar(el) {
    var self = this;
    this.el = el;
    this.url = el.getAttribute("data-progress-url");
    // The same job's document from Django, which checks what memcached holds
    // (the token URL may be answered by nginx, which cannot).
    this.checkedUrl = el.getAttribute("data-progress-checked-url");
    this.job = jobOf(this.url);
    this.data = null;
    this.field = function (name) { return el.querySelector("[data-field=" + name + "]"); };
    this.bar = el.querySelector("[role=progressbar]");
    this.fill = el.querySelector(".fill");
    this.poller = webfarm.poll(this.url, {
      minDelay: MIN_DELAY,
      idleMax: IDLE_MAX,
      errorMax: ERROR_MAX,
      check: function (data) { return checked(data, self.job); },
      isFinal: function (data) { return FINAL[data.state]; },
      onProgress: function (data) {
        if (FINAL[data.state] && !self.checkedByDjango()) {
          // An end is what makes a page act (reload, move to another job):
          // Django is asked first, and answers every later poll of this bar.
          self.poller.stop();
          self.poller.setUrl(self.checkedUrl);
          setTimeout(function () { self.poller.resume(0); }, 0);
          return;
        }
        self.setNotice("");
        self.render(data);
        if (data.state === "lost" && data.retried_as) self.follow(data.job, data.retried_as);
      },
      onSuccess: function (data) {
        el.dispatchEvent(new CustomEvent("progress:final", { bubbles: true, detail: data }));
      },
      onFailure: function (status) {
        self.setNotice(status === 404 ? "This job no longer exists." : "Your session has ended: log in again.");
      },
      onUnchanged: function () { self.setNotice(""); },
      onRetry: function (wait) {
        self.setNotice("Progress is temporarily unavailable; retrying in " + Math.max(1, Math.round(wait / 1000)) + " s…");
      },
    });
    var cancel = el.querySelector("form.cancel");
    if (cancel) cancel.addEventListener("submit", this.cancel.bind(this, cancel));
  }

  Bar.prototype.checkedByDjango = function () {
    return !this.checkedUrl || this.poller.url === this.checkedUrl;
  };

  // A lost job that runs again goes on as another job (Django said so): the
  // person is taken to a page Django renders for it, with that job's own
  // Cancel button. Nothing on this page is pointed at the other job.
  Bar.prototype.follow = function (from, to) {
    this.poller.stop();
    var path = window.location.pathname;
    if (path.indexOf("/" + from + "/") !== -1) window.location.assign(path.split(from).join(to));
    else window.location.reload();  // a list of jobs: Django lists the new one
  };

  Bar.prototype.setNotice = function (text) {
    var message = this.field("message");
    if (!text) {
      if (this.noticeShown && message && this.data) message.textContent = this.data.message || "";
      this.noticeShown = false;
      return;
    }
    this.noticeShown = true;
    if (message) message.textContent = text;
  };

  Bar.prototype.render = function (data) {
    this.data = data;
    var percent = data.percent === null ? 0 : data.percent;
    this.el.className = this.el.className.replace(/\bstate-\w+/, "") + " state-" + data.state;
    this.bar.setAttribute("aria-valuenow", String(Math.round(percent)));
    this.bar.setAttribute("aria-valuetext", data.state + ", " + Math.round(percent) + " percent");
    this.fill.style.width = percent + "%";
    this.field("state").textContent = data.cancel_requested && !FINAL[data.state] ? "cancelling" : data.state;
    this.field("percent").textContent = data.percent === null ? "" : Math.round(percent) + " %";
    this.field("stage").textContent = FINAL[data.state] ? "" : data.stage || "";
    this.field("eta").textContent = FINAL[data.state] ? "" : formatEta(data.eta_seconds);
    var elapsed = this.field("elapsed");
    if (elapsed) elapsed.textContent = formatElapsed(data);
    this.field("message").textContent = data.message || "";
    var parts = this.field("parts");
    if (parts) {
      parts.textContent = partsLine(data);
      parts.hidden = !data.parts;
    }
    var retry = this.field("retry");
    if (retry) {
      retry.hidden = !(data.attempt > 1);
      retry.textContent = data.attempt > 1
        ? "Attempt " + data.attempt + ": running again because the worker of the last attempt stopped." : "";
    }
    var error = this.field("error");
    error.textContent = data.error || "";
    error.hidden = !data.error;
    var download = this.field("download");
    if (data.result_url) { download.href = data.result_url; download.hidden = false; }
    else { download.hidden = true; }
    var cancel = this.el.querySelector("form.cancel");
    if (cancel) cancel.hidden = !!FINAL[data.state];
    this.announce(data);
    this.showAgain(data);
  };

  // A page may offer to start an ended job again ([data-again-for=<job>]):
  // shown when the job ends without its result.
  Bar.prototype.showAgain = function (data) {
    var ended = FINAL[data.state] && data.state !== "succeeded" && !data.retried_as;
    document.querySelectorAll("[data-again-for]").forEach(function (el) {
      if (el.getAttribute("data-again-for") === data.job) el.hidden = !ended;
    });
  };

  // The live region speaks when the state or the stage changes or a quarter
  // is passed, not at every poll (the message changes at every one).
  Bar.prototype.announce = function (data) {
    var live = this.field("announce");
    if (!live) return;
    var percent = data.percent === null ? 0 : data.percent;
    var key = data.state + "|" + (data.stage || "") + "|" + Math.floor(percent / 25);
    if (key === this.announced) return;
    this.announced = key;
    var title = this.bar.getAttribute("aria-label") || "Job";
    if (FINAL[data.state]) {
      // A failure's reason is in the error, a role=alert of its own.
      live.textContent = title + ": " + data.state + (data.state === "succeeded" && data.message ? ". " + data.message : ".");
    } else {
      live.textContent = title + ": " + data.state + (data.stage ? ", " + data.stage : "") + ", " + Math.round(percent) + " percent.";
    }
  };

  Bar.prototype.cancel = function (form, event) {
    event.preventDefault();
    var self = this;
    var button = form.querySelector("button");
    if (button) button.disabled = true;
    fetch(form.action, {
      method: "POST",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken(form) },
      credentials: "same-origin",
    }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    }).then(function (data) {
      data = checked(data, self.job);
      if (data === null) throw new Error("not this job's document");
      self.render(data);
      if (!FINAL[data.state]) self.poller.resume(MIN_DELAY);
    }).catch(function () {
      if (button) button.disabled = false;
      self.setNotice("Could not cancel; try again.");
    });
  };

  // -- refusals: a 503 with Retry-After says when to try again ---------------

  function countdown(el, seconds) {
    var scope = el.closest("form") || el.parentNode;
    var button = scope.querySelector("button[type=submit], [data-retry-link]");
    var label = scope.querySelector("[data-countdown]") || document.querySelector("[data-countdown]");
    var until = Date.now() + seconds * 1000;
    if (button) { button.disabled = true; button.setAttribute("aria-disabled", "true"); }
    (function tick() {
      var left = Math.ceil((until - Date.now()) / 1000);
      if (left > 0) {
        if (label) label.textContent = "You can try again in " + left + " s.";
        setTimeout(tick, 250);
        return;
      }
      if (label) label.textContent = "You can try again now.";
      if (button) { button.disabled = false; button.removeAttribute("aria-disabled"); }
    })();
  }

  function enhanceStartForm(form) {
    var refusal = form.querySelector("[data-refusal]");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = form.querySelector("button[type=submit]");
      if (button) button.disabled = true;
      fetch(form.action || window.location.href, {
        method: "POST",
        body: new FormData(form),
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      }).then(function (response) {
        if (response.status === 202) {
          return response.json().then(function (data) { window.location.assign(data.job_url); });
        }
        if (response.status === 503 && refusal) {
          var wait = parseFloat(response.headers.get("Retry-After")) || 5;
          return response.json().then(function (data) {
            refusal.textContent = data.error;
            refusal.hidden = false;
            countdown(refusal, wait);
          });
        }
        form.submit();  // field errors and the rest: the server's own page
      }).catch(function () { form.submit(); });
    });
  }

  var bars = [];

  // Bars for the [data-progress-url] elements under `root` not yet started.
  function startBars(root) {
    var nodes = (root || document).querySelectorAll("[data-progress-url]:not([data-bar-started])");
    for (var i = 0; i < nodes.length; i++) {
      nodes[i].setAttribute("data-bar-started", "");
      var bar = new Bar(nodes[i]);
      bars.push(bar);
      // A bar the server rendered as ended has nothing left to learn.
      if (nodes[i].hasAttribute("data-final")) { bar.poller.stop(); continue; }
      // Stagger the first polls so a page of bars doesn't fire at once.
      bar.poller.schedule(Math.round(Math.random() * 200));
      if (nodes[i].hasAttribute("data-reload-on-success")) {
        nodes[i].addEventListener("progress:final", function (event) {
          if (event.detail.state === "succeeded") window.location.reload();
        });
      }
    }
  }

  // Stop the bars under `root` (a list about to be replaced).
  function stopBars(root) {
    bars = bars.filter(function (bar) {
      if (!root.contains(bar.el)) return true;
      bar.poller.stop();
      return false;
    });
  }

  function start() {
    document.querySelectorAll("[data-retry-after]").forEach(function (el) {
      countdown(el, parseFloat(el.getAttribute("data-retry-after")) || 5);
    });
    document.querySelectorAll("form[data-start-form]").forEach(enhanceStartForm);
    startBars(document);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  window.WebfarmProgress = {
    bars: function () { return bars; },
    start: startBars,
    stop: stopBars,
  };
})();
