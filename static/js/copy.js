// A "Copy" button copies the text of the element it names (data-copy), e.g. a Codex config.toml, and says so.
// Its own file: the admin's pages load it without the live pages' script.
(function () {
  "use strict";
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("button[data-copy]");
    if (!button) { return; }
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) { return; }
    navigator.clipboard.writeText(source.textContent).then(function () {
      button.textContent = "Copied";
      button.setAttribute("data-copied", "");
    }, function () { button.textContent = "Select and copy by hand"; });
  });
})();
