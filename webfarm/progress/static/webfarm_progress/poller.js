/*
 * One poller for every live part of the site: job bars, poll results, the
 * dashboard. No build step, no dependencies.
 *
 *   var poller = webfarm.poll(url, {
 *     onProgress: function (data) {},      // a new document
 *     onSuccess: function (data) {},       // isFinal(data): polling ends
 *     onFailure: function (status) {},     // 401/403/404: polling ends
 *     onRetry: function (waitMs, error) {} // an error; polling again after waitMs
 *     onUnchanged: function () {},         // the document is as it was
 *     isFinal: function (data) { return false; },
 *     check: function (data) { return data; }, // null: not a document to believe (retried as an error)
 *     minDelay: 500, idleMax: 5000, errorMax: 30000, as: "json" (or "text"),
 *   });
 *   poller.stop(); poller.resume(0); poller.setUrl(other);
 *
 * Fast while the document changes, slower (up to idleMax) while it doesn't:
 * a 304 to If-None-Match, or, where no ETag comes (nginx's fast path), the
 * same `updated_at` and state as last time (for text: the same text).
 * Exponential back-off with jitter on errors, Retry-After honoured, paused
 * while the tab is hidden.
 *
 * One request at a time: a poll asked for while one is on its way (a tab
 * shown again, resume()) follows it instead of running beside it. An answer
 * that arrives after setUrl() or stop() is dropped: it answers a question
 * the page no longer asks, and acting on it would let a slow answer from the
 * unchecked URL (nginx's, from memcached) pass for the checked one's.
 */
(function () {
  "use strict";

  var all = [];
  function jitter(ms) { return Math.round(ms * (0.8 + Math.random() * 0.4)); }
  function nothing() {}

  function version(data) {
    if (typeof data === "string") return data;
    if (data && data.updated_at !== undefined) return data.updated_at + "|" + data.state;
    return null;  // no way to tell: every document counts as new
  }

  function Poller(url, options) {
    var o = options || {};
    this.url = url;
    this.minDelay = o.minDelay || 500;
    this.idleMax = o.idleMax || 5000;
    this.errorMax = o.errorMax || 30000;
    this.as = o.as || "json";
    this.isFinal = o.isFinal || function () { return false; };
    this.check = o.check || function (data) { return data; };
    this.onProgress = o.onProgress || nothing;
    this.onSuccess = o.onSuccess || nothing;
    this.onFailure = o.onFailure || nothing;
    this.onRetry = o.onRetry || nothing;
    this.onUnchanged = o.onUnchanged || nothing;
    this.etag = null;
    this.seen = null;
    this.delay = this.minDelay;
    this.errors = 0;
    this.timer = null;
    this.stopped = false;
    this.busy = false;      // a request is on its way
    this.pending = null;    // the delay of a poll asked for meanwhile
    this.generation = 0;    // bumped by setUrl() and stop(): older answers are dropped
    all.push(this);
  }

  Poller.prototype.schedule = function (ms) {
    clearTimeout(this.timer);
    if (this.stopped) return;
    if (document.hidden) { this.timer = null; return; }  // resumed on visibilitychange
    if (this.busy) { this.pending = ms; this.timer = null; return; }  // after the answer
    this.timer = setTimeout(this.poll.bind(this), ms);
  };

  Poller.prototype.stop = function () {
    this.stopped = true;
    this.generation += 1;
    clearTimeout(this.timer);
  };

  Poller.prototype.resume = function (ms) { this.stopped = false; this.schedule(ms || 0); };

  Poller.prototype.setUrl = function (url) {
    this.url = url;
    this.etag = null;
    this.seen = null;
    this.generation += 1;
  };

  Poller.prototype.unchanged = function () {
    this.errors = 0;
    this.delay = Math.min(this.delay * 1.5, this.idleMax);
    this.onUnchanged();
    this.schedule(jitter(this.delay));
  };

  Poller.prototype.poll = function () {
    var self = this;
    if (self.busy) return;
    self.busy = true;
    self.pending = null;
    var generation = self.generation;
    function current() { return generation === self.generation; }
    function done() {
      self.busy = false;
      var ms = self.pending;
      self.pending = null;
      if (ms !== null) self.schedule(ms);
    }
    var headers = { Accept: self.as === "json" ? "application/json" : "text/html" };
    if (self.etag) headers["If-None-Match"] = self.etag;
    fetch(self.url, { headers: headers, cache: "no-store", credentials: "same-origin" })
      .then(function (response) {
        if (!current()) return;
        if (response.status === 304) return self.unchanged();
        if (response.status === 401 || response.status === 403 || response.status === 404) {
          self.stop();
          return self.onFailure(response.status);
        }
        if (!response.ok) {
          var err = new Error("HTTP " + response.status);
          err.retryAfter = parseFloat(response.headers.get("Retry-After"));
          throw err;
        }
        var etag = response.headers.get("ETag");
        return (self.as === "json" ? response.json() : response.text()).then(function (data) {
          if (!current()) return;
          data = self.check(data);
          if (data === null) throw new Error("not a document of this page");
          self.etag = etag;
          var seen = version(data);
          if (seen !== null && seen === self.seen) return self.unchanged();
          self.seen = seen;
          self.errors = 0;
          self.delay = self.minDelay;
          self.onProgress(data);
          if (self.stopped) return;  // onProgress may stop it
          if (self.isFinal(data)) {
            self.stop();
            return self.onSuccess(data);
          }
          self.schedule(jitter(self.delay));
        });
      })
      .catch(function (err) {
        if (!current()) return;
        self.errors += 1;
        var wait = Math.min(self.minDelay * Math.pow(2, self.errors), self.errorMax);
        if (err && err.retryAfter > 0) wait = Math.max(wait, err.retryAfter * 1000);
        self.onRetry(wait, err);
        self.schedule(jitter(wait));
      })
      .then(done, done);
  };

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) return;
    all.forEach(function (poller) { if (!poller.stopped) poller.schedule(0); });
  });

  window.webfarm = window.webfarm || {};
  window.webfarm.Poller = Poller;
  window.webfarm.poll = function (url, options) { return new Poller(url, options); };
})();
