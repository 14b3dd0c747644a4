// Django's two-box picker (filter_horizontal: a user's groups and permissions, a group's permissions) names its
// search boxes with an aria-label on a bare <span> inside their <label>, which ARIA does not allow on an element
// without a role (axe-core's aria-prohibited-attr, serious): a screen reader may read the box unnamed. The span is
// an icon standing for those words, so it gets the img role that lets it carry them. SelectFilter builds the
// boxes on the window's load event, which this script's listener follows (added later, it runs later).
"use strict";
window.addEventListener("load", function () {
    document.querySelectorAll("span.help-tooltip[aria-label]:not([role])").forEach(function (icon) {
        icon.setAttribute("role", "img");
    });
});
