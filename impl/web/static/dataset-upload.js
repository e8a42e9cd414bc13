// dataset-upload.js checks the chosen file's size against the upload limit before the upload
// starts (progressive enhancement: the server refuses a larger file with 413 either way, but a
// browser may show a reset connection instead of that page when a large body is cut short), and
// shows in the name field the dataset name the file's name gives (the server derives the same
// name when the field is left empty).
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
  // The dataset name a file's name gives, by the server's rule (NameFor in
  // impl/dataset/filename.go): shown in the name field before the upload, unless a name was typed.
  var nameField = document.getElementById("dataset-name");
  var derivedNote = document.getElementById("dataset-name-derived");
  var valid = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
  function datasetName(fileName) {
    var base = fileName.replace(/^.*[\\/]/, "");
    var stem = base.replace(/\.[^.]*$/, "");
    if (valid.test(stem)) {
      return stem;
    }
    var plain = stem.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
    var out = "";
    var sep = "";
    for (var ch of plain) {
      if (/^[a-z0-9]$/.test(ch)) {
        if (out !== "" && sep !== "") {
          out += sep;
        }
        sep = "";
        out += ch;
      } else {
        sep = ch === "-" && (sep === "" || sep === "-") ? "-" : "_";
      }
    }
    if (out.length > 64) {
      out = out.slice(0, 64).replace(/[_-]+$/, "");
    }
    return out === "" ? "dataset" : out;
  }
  function showName() {
    var f = input.files && input.files[0];
    if (!nameField || !f || (nameField.value !== "" && nameField.dataset.derived !== nameField.value)) {
      return;
    }
    var name = datasetName(f.name);
    nameField.value = name;
    nameField.dataset.derived = name;
    if (derivedNote) {
      derivedNote.textContent = name === f.name.replace(/\.[^.]*$/, "")
        ? ""
        : "“" + f.name + "” will be stored as " + name + ".";
    }
  }
  input.addEventListener("change", function () {
    note.textContent = tooLarge()
      ? "This file is larger than the upload limit of " + input.dataset.maxText + ": it cannot be uploaded here."
      : "";
    showName();
  });
  form.addEventListener("submit", function (ev) {
    if (tooLarge()) {
      ev.preventDefault();
      note.textContent = "This file is larger than the upload limit of " + input.dataset.maxText + ": it cannot be uploaded here.";
    }
  });
})();
