// submit-once.js sends a form marked data-submit-once once: a second submission while the first
// is on its way (a double click, Enter pressed twice) is cancelled, and the form's submit
// buttons are disabled once the first has left, so that the browser shows the answer to the
// one request the server acted on (the new-key form: the page that shows the key's secret, once).
// When the browser brings the page back from its history, the form can be sent again. Without
// scripts the server's own claim of the form (impl/web, claimKeyForm) still creates one key.
(function () {
  "use strict";
  function buttons(form) {
    return form.querySelectorAll("button[type=submit], input[type=submit]");
  }
  document.querySelectorAll("form[data-submit-once]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (form.dataset.sent === "1") {
        ev.preventDefault();
        return;
      }
      form.dataset.sent = "1";
      // After the event: a button disabled during it would leave its name out of the data.
      setTimeout(function () {
        buttons(form).forEach(function (b) {
          b.disabled = true;
        });
      }, 0);
    });
  });
  window.addEventListener("pageshow", function (ev) {
    if (!ev.persisted) {
      return;
    }
    document.querySelectorAll("form[data-submit-once]").forEach(function (form) {
      delete form.dataset.sent;
      buttons(form).forEach(function (b) {
        b.disabled = false;
      });
    });
  });
})();
