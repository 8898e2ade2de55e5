/*
 * Live poll results: fetch the results document every few seconds (ETag,
 * paused while the tab is hidden) and move the bars.
 */
(function () {
  "use strict";
  var EVERY = 2000;

  function Results(el) {
    this.el = el;
    this.url = el.getAttribute("data-results-url");
    this.etag = null;
  }

  Results.prototype.poll = function () {
    var self = this;
    if (document.hidden) return self.later(EVERY);
    var headers = { Accept: "application/json" };
    if (self.etag) headers["If-None-Match"] = self.etag;
    fetch(self.url, { headers: headers, cache: "no-store", credentials: "same-origin" })
      .then(function (response) {
        if (response.status === 304) return null;
        if (!response.ok) throw new Error("HTTP " + response.status);
        self.etag = response.headers.get("ETag");
        return response.json();
      })
      .then(function (data) { if (data) self.render(data); self.later(EVERY); })
      .catch(function () { self.later(EVERY * 3); });
  };

  Results.prototype.later = function (ms) { setTimeout(this.poll.bind(this), ms); };

  Results.prototype.render = function (data) {
    var el = this.el;
    el.querySelector("[data-field=votes]").textContent = data.votes + (data.votes === 1 ? " vote" : " votes");
    el.querySelector("[data-field=live]").hidden = data.live;
    data.choices.forEach(function (choice) {
      var row = el.querySelector("[data-choice='" + choice.id + "']");
      if (!row) return;
      row.querySelector("[data-field=percent]").textContent = choice.percent + " %";
      row.querySelector("[data-field=count]").textContent = choice.votes;
      row.querySelector("[role=progressbar]").setAttribute("aria-valuenow", String(Math.round(choice.percent)));
      row.querySelector(".fill").style.width = choice.percent + "%";
    });
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-results-url]").forEach(function (el) { new Results(el).later(EVERY); });
  });
})();
