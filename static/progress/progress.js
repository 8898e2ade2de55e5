/*
 * Live progress bars. Every element with data-progress-url becomes a bar that
 * polls its URL until the job reaches a final state. No build step, no
 * dependencies; any number of bars per page.
 *
 * Polling: fast while the job moves, slower while it doesn't (304 Not
 * Modified), exponential back-off with jitter on errors, Retry-After honoured,
 * paused while the tab is hidden, stopped at a final state.
 */
(function () {
  "use strict";

  var FINAL = { succeeded: 1, failed: 1, cancelled: 1, lost: 1 };
  var MIN_DELAY = 500, IDLE_MAX = 5000, ERROR_MAX = 30000;

  function jitter(ms) { return Math.round(ms * (0.8 + Math.random() * 0.4)); }

  function formatEta(seconds) {
    if (seconds === null || seconds === undefined) return "";
    if (seconds < 60) return "about " + Math.max(1, Math.round(seconds)) + " s left";
    if (seconds < 3600) return "about " + Math.round(seconds / 60) + " min left";
    return "about " + (seconds / 3600).toFixed(1) + " h left";
  }

  function csrfToken(form) {
    var input = form && form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function Bar(el) {
    this.el = el;
    this.url = el.getAttribute("data-progress-url");
    this.etag = null;
    this.data = null;
    this.delay = MIN_DELAY;
    this.errors = 0;
    this.timer = null;
    this.stopped = false;
    this.field = function (name) { return el.querySelector("[data-field=" + name + "]"); };
    this.bar = el.querySelector("[role=progressbar]");
    this.fill = el.querySelector(".fill");
    var cancel = el.querySelector("form.cancel");
    if (cancel) cancel.addEventListener("submit", this.cancel.bind(this, cancel));
  }

  Bar.prototype.schedule = function (ms) {
    clearTimeout(this.timer);
    if (this.stopped) return;
    if (document.hidden) { this.timer = null; return; }  // resumed on visibilitychange
    this.timer = setTimeout(this.poll.bind(this), ms);
  };

  Bar.prototype.poll = function () {
    var self = this;
    var headers = { Accept: "application/json" };
    if (self.etag) headers["If-None-Match"] = self.etag;
    fetch(self.url, { headers: headers, cache: "no-store", credentials: "same-origin" })
      .then(function (response) {
        var retryAfter = parseFloat(response.headers.get("Retry-After"));
        if (response.status === 304) {
          self.errors = 0;
          self.setNotice("");
          self.delay = Math.min(self.delay * 1.5, IDLE_MAX);
          return self.schedule(jitter(self.delay));
        }
        if (response.status === 404 || response.status === 401 || response.status === 403) {
          self.stopped = true;
          return self.setNotice(response.status === 404 ? "This job no longer exists."
                                                         : "Your session has ended: log in again.");
        }
        if (!response.ok) {
          var err = new Error("HTTP " + response.status);
          err.retryAfter = retryAfter;
          throw err;
        }
        return response.json().then(function (data) {
          self.errors = 0;
          self.etag = response.headers.get("ETag");
          self.delay = MIN_DELAY;
          self.setNotice("");
          self.render(data);
          if (data.state === "lost" && data.retried_as) {
            // The worker died and the job runs again as a new one: follow it.
            self.follow(data.job, data.retried_as);
            self.schedule(MIN_DELAY);
          } else if (FINAL[data.state]) {
            self.stopped = true;
            self.el.dispatchEvent(new CustomEvent("progress:final", { bubbles: true, detail: data }));
          } else {
            self.schedule(jitter(self.delay));
          }
        });
      })
      .catch(function (err) {
        self.errors += 1;
        var wait = Math.min(MIN_DELAY * Math.pow(2, self.errors), ERROR_MAX);
        if (err && err.retryAfter > 0) wait = Math.max(wait, err.retryAfter * 1000);
        self.setNotice("Progress is temporarily unavailable; retrying in " + Math.max(1, Math.round(wait / 1000)) + " s…");
        self.schedule(jitter(wait));
      });
  };

  Bar.prototype.follow = function (from, to) {
    // A page about the lost job (its reload on success) becomes the new job's page.
    if (window.location.pathname.indexOf(from) !== -1) {
      window.history.replaceState(null, "", window.location.pathname.replace(from, to));
    }
    this.url = this.url.replace(from, to);
    this.el.setAttribute("data-progress-url", this.url);
    this.etag = null;
    var cancel = this.el.querySelector("form.cancel");
    if (cancel) cancel.action = cancel.action.replace(from, to);
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
    this.field("message").textContent = data.message || "";
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
      self.render(data);
      self.stopped = false;
      if (!FINAL[data.state]) self.schedule(MIN_DELAY);
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
  function start() {
    document.querySelectorAll("[data-retry-after]").forEach(function (el) {
      countdown(el, parseFloat(el.getAttribute("data-retry-after")) || 5);
    });
    document.querySelectorAll("form[data-start-form]").forEach(enhanceStartForm);
    var nodes = document.querySelectorAll("[data-progress-url]");
    for (var i = 0; i < nodes.length; i++) {
      var bar = new Bar(nodes[i]);
      bars.push(bar);
      // A bar the server rendered as ended has nothing left to learn.
      if (nodes[i].hasAttribute("data-final")) { bar.stopped = true; continue; }
      // Stagger the first polls so a page of bars doesn't fire at once.
      bar.schedule(Math.round(Math.random() * 200));
      if (nodes[i].hasAttribute("data-reload-on-success")) {
        nodes[i].addEventListener("progress:final", function (event) {
          if (event.detail.state === "succeeded") window.location.reload();
        });
      }
    }
  }
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) return;
    bars.forEach(function (bar) { if (!bar.stopped) bar.schedule(0); });
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  window.WebfarmProgress = { bars: bars };
})();
