// open-details.js opens a <details> that a link on the page leads to (href="#its-id"), and the
// one the page's address names (a link from elsewhere, or the page loaded again): following a
// link to a closed <details> scrolls to its summary and leaves it closed, which reads as a
// link that did nothing (the Agents page's "how a script plays the model"). Without scripts
// the summary is still there to open by hand.
(function () {
  "use strict";
  function open(id) {
    var el = id && document.getElementById(id);
    if (el && el.tagName === "DETAILS") {
      el.open = true;
    }
  }
  function idOf(fragment) {
    try {
      return decodeURIComponent(fragment.slice(1));
    } catch (e) {
      return "";
    }
  }
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest('a[href^="#"]');
    if (a) {
      open(idOf(a.getAttribute("href")));
    }
  });
  open(idOf(location.hash));
})();
