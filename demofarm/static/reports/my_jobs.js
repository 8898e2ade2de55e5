/*
 * "My jobs" keeps itself current: it polls the list's JSON (the ids it shows,
 * webfarm.poll) and, when jobs come or go (started elsewhere, or out of the
 * filter as they end), fetches the page again and swaps the list in. Each
 * bar follows its own job meanwhile (progress.js).
 */
(function () {
  "use strict";
  var list = document.querySelector("[data-live-jobs]");
  if (!list || !window.webfarm || !window.WebfarmProgress) return;

  function shown() {
    return Array.prototype.map.call(list.querySelectorAll("[data-job-id]"), function (el) {
      return el.getAttribute("data-job-id");
    }).join(",");
  }

  var busy = false;
  function refresh() {
    if (busy) return;
    busy = true;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        var fresh = html && new DOMParser().parseFromString(html, "text/html").querySelector("[data-live-jobs]");
        if (!fresh) return;
        WebfarmProgress.stop(list);
        list.innerHTML = fresh.innerHTML;
        WebfarmProgress.start(list);
      })
      .catch(function () {})  // the next poll tries again
      .then(function () { busy = false; });
  }

  webfarm.poll(list.getAttribute("data-live-jobs"), {
    minDelay: 2000,
    idleMax: 10000,
    errorMax: 30000,
    onProgress: function (data) { if (data.updated_at !== shown()) refresh(); },
  }).schedule(2000);
})();
