// dataset-upload.js checks the chosen file's size against the upload limit before the upload
// starts (progressive enhancement: the server refuses a larger file with 413 either way, but a
// browser may show a reset connection instead of that page when a large body is cut short).
(function () {
  "use strict";
  var input = document.getElementById("dataset-file");
  var note = document.getElementById("upload-size");
  if (!input || !note || !input.dataset.maxBytes) {
    return;
  }
  var max = Number(input.dataset.maxBytes);
  var form = input.form;
  function tooLarge() {
    var f = input.files && input.files[0];
    return f && f.size > max;
  }
  input.addEventListener("change", function () {
    note.textContent = tooLarge()
      ? "This file is larger than the upload limit of " + input.dataset.maxText + ": it cannot be uploaded here."
      : "";
  });
  form.addEventListener("submit", function (ev) {
    if (tooLarge()) {
      ev.preventDefault();
      note.textContent = "This file is larger than the upload limit of " + input.dataset.maxText + ": it cannot be uploaded here.";
    }
  });
})();
