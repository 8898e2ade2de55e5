/*
 * Live poll results: the results document every few seconds (webfarm.poll,
 * webfarm/progress/static/webfarm_progress/poller.js) moves the bars.
 */
(function () {
  "use strict";
  var EVERY = 2000;

  function Results(el) {
    this.el = el;
    this.poller = webfarm.poll(el.getAttribute("data-results-url"), {
      minDelay: EVERY,
      idleMax: EVERY,
      errorMax: EVERY * 3,
      onProgress: this.render.bind(this),
    });
  }

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
    document.querySelectorAll("[data-results-url]").forEach(function (el) { new Results(el).poller.schedule(EVERY); });
  });
})();
