// copy.js gives the key-created page its copy buttons (progressive enhancement: without
// scripts the buttons stay hidden and the texts are there to select). A button[data-copy]
// copies the text of the element whose id it names (an input's value, or a <pre>'s text) and
// says what happened in the element named by data-status. The clipboard API needs a
// permission that a browser may refuse without asking (or a page without focus lacks): then
// the text is selected, the older copy command is tried on the selection, and the status says
// to press Ctrl+C (⌘C) when that did not copy either. Nothing fails silently.
(function () {
  "use strict";
  function say(button, text) {
    var status = document.getElementById(button.dataset.status);
    if (status) {
      status.textContent = text;
    }
  }
  function select(el) {
    if (el.select) {
      el.focus();
      el.select();
      return;
    }
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  function fallback(button, el) {
    select(el);
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (e) {
      copied = false;
    }
    say(button, copied
      ? "Copied (the text is selected too)."
      : "Selected: press Ctrl+C (⌘C on a Mac) to copy it.");
  }
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var el = document.getElementById(button.dataset.copy);
    if (!el) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = el.value !== undefined && el.tagName === "INPUT" ? el.value : el.textContent;
      if (!navigator.clipboard || !navigator.clipboard.writeText) {
        fallback(button, el);
        return;
      }
      navigator.clipboard.writeText(text).then(function () {
        say(button, "Copied.");
      }, function () {
        fallback(button, el);
      });
    });
  });
})();
