// Opened as a file, the site cannot search: the browser refuses to load the search index over
// file://, and the search box would find nothing with nothing said. Say what works instead.
if (window.location.protocol === "file:") {
  document.addEventListener("DOMContentLoaded", function () {
    var input = document.getElementById("mkdocs-search-query");
    if (input) {
      input.disabled = true;
      input.placeholder = "Search needs the served site: make docs-serve";
      input.title = "Opened as a file, the browser will not load the search index. Run make docs-serve and open http://127.0.0.1:8000";
    }
  });
}
