// The memory browser's little JavaScript: score parts on demand, and the fact graph.
(function () {
  "use strict";
  var parts = document.getElementById("show-parts");
  if (parts) {
    parts.addEventListener("change", function () {
      document.querySelectorAll("table.parts").forEach(function (t) { t.hidden = !parts.checked; });
    });
  }
  var box = document.getElementById("graph");
  var data = document.getElementById("graph-data");
  if (box && data && window.cytoscape) {
    var elements = JSON.parse(data.textContent);
    var cy = window.cytoscape({
      container: box,
      elements: elements,
      wheelSensitivity: 0.3,
      style: [
        { selector: "node", style: { "label": "data(label)", "background-color": "#3b6ea5", "color": "#1d2733",
          "font-size": 11, "text-valign": "bottom", "text-margin-y": 4, "width": 18, "height": 18 } },
        { selector: "edge", style: { "label": "data(label)", "curve-style": "bezier", "target-arrow-shape": "triangle",
          "line-color": "#7a8794", "target-arrow-color": "#7a8794", "font-size": 9, "text-rotation": "autorotate",
          "text-background-color": "#ffffff", "text-background-opacity": 0.8, "width": 1.5 } },
        { selector: "edge.superseded", style: { "line-style": "dashed", "line-dash-pattern": [6, 4], "line-color": "#c0392b",
          "target-arrow-color": "#c0392b", "color": "#c0392b" } }
      ],
      layout: elements.length > 400 ? { name: "grid", padding: 20 }
        : { name: "cose", animate: false, padding: 40, idealEdgeLength: function () { return 160; },
            nodeRepulsion: function () { return 40000; } }
    });
    if (cy.zoom() > 2) { cy.zoom(2); cy.center(); }  // a few nodes: readable, not blown up
    cy.on("tap", "edge", function (evt) {
      var facts = evt.target.data("facts") || [];
      if (facts.length) { window.location.href = window.SOULPASS_RECORD_URL + facts[0] + "?at=" + window.SOULPASS_AT; }
    });
    box.setAttribute("data-rendered", String(cy.nodes().length));
  }
})();
