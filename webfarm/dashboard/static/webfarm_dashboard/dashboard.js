/*
 * Keeps the dashboard current without reloading it (the job bars keep their
 * own polling): the live part (servers, workers, queues, activity) is fetched
 * again every few seconds and the charts every minute. Paused while the tab
 * is hidden; on an error the last good content stays, marked as stale.
 */
(function () {
  "use strict";

  function every(seconds, fn) {
    var timer = null;
    function tick() {
      if (document.hidden) { timer = null; return; }
      Promise.resolve(fn()).finally(function () { timer = setTimeout(tick, seconds * 1000); });
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && timer === null) tick();
    });
    timer = setTimeout(tick, seconds * 1000);
  }

  function followLive(box) {
    webfarm.poll(box.getAttribute("data-live-url"), {
      as: "text",
      minDelay: (+box.getAttribute("data-refresh-every") || 5) * 1000,
      idleMax: (+box.getAttribute("data-refresh-every") || 5) * 1000,
      errorMax: 60000,
      onProgress: function (html) { box.innerHTML = html; box.classList.remove("stale"); },
      onUnchanged: function () { box.classList.remove("stale"); },
      // On an error the last good content stays, marked as stale.
      onRetry: function () { box.classList.add("stale"); },
    }).schedule((+box.getAttribute("data-refresh-every") || 5) * 1000);
  }

  function refreshChart(img) {
    var url = img.getAttribute("src").split("?")[0];
    img.setAttribute("src", url + "?t=" + Date.now());
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("live");
    if (box) followLive(box);
    document.querySelectorAll("img[data-refresh-every]").forEach(function (img) {
      every(+img.getAttribute("data-refresh-every") || 60, function () { refreshChart(img); });
    });
  });
})();
