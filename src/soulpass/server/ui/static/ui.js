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
    var nodes = elements.filter(function (e) { return !e.data.source; }).length;
    // Room for the labels: the canvas grows with the number of entities (the page scrolls).
    box.style.height = Math.min(1600, Math.max(560, 34 * nodes)) + "px";
    var cy = window.cytoscape({
      container: box,
      elements: elements,
      wheelSensitivity: 0.3,
      style: [
        { selector: "node", style: { "label": "data(label)", "background-color": "#3b6ea5", "color": "#1d2733",
          "font-size": 13, "text-valign": "bottom", "text-margin-y": 3, "width": 14, "height": 14,
          "text-background-color": "#ffffff", "text-background-opacity": 0.85, "text-background-padding": 1 } },
        { selector: "edge", style: { "label": "data(label)", "curve-style": "bezier", "target-arrow-shape": "triangle",
          "line-color": "#9aa5b1", "target-arrow-color": "#9aa5b1", "font-size": 11, "color": "#44505c",
          "text-background-color": "#ffffff", "text-background-opacity": 0.85, "text-background-padding": 1,
          "width": 1.5, "control-point-step-size": 28 } },
        { selector: "edge.superseded", style: { "line-style": "dashed", "line-dash-pattern": [6, 4], "line-color": "#c0392b",
          "target-arrow-color": "#c0392b", "color": "#c0392b" } }
      ],
      layout: elements.length > 400 ? { name: "grid", padding: 20 }
        : { name: "cose", animate: false, randomize: true, padding: 30, nodeDimensionsIncludeLabels: true,
            idealEdgeLength: function () { return 120; }, nodeRepulsion: function () { return 60000; } }
    });
    stackParallelLabels(cy);
    if (elements.length <= 400) { spreadLabels(cy); }
    cy.fit(undefined, 30);
    if (cy.zoom() > 1.6) { cy.zoom(1.6); cy.center(); }  // a few nodes: readable, not blown up
    cy.on("tap", "edge", function (evt) {
      var facts = evt.target.data("facts") || [];
      if (facts.length) { window.location.href = window.SOULPASS_RECORD_URL + facts[0] + "?at=" + window.SOULPASS_AT; }
    });
    window.soulpassGraph = cy;  // the browser tests read the layout (label boxes) from it
    box.setAttribute("data-rendered", String(cy.nodes().length));
  }

  // Labels that overlap cannot be read: push the entities of each overlapping pair apart a little
  // at a time (spreading the whole layout when that stalls) until no label box meets another, or
  // give up after a bounded number of rounds.
  function labelBox(ele) {  // an entity with its label; a fact's label alone
    return ele.boundingBox({ includeNodes: ele.isNode(), includeEdges: false, includeLabels: true });
  }

  function labelBoxes(cy) {
    return cy.elements().filter(function (e) { return !!e.data("label"); }).map(function (e) {
      return { ele: e, b: labelBox(e) };
    });
  }

  function overlapping(boxes) {
    var found = [];
    for (var i = 0; i < boxes.length; i++) {
      for (var j = i + 1; j < boxes.length; j++) {
        var a = boxes[i].b, c = boxes[j].b;
        if (a.x1 < c.x2 && c.x1 < a.x2 && a.y1 < c.y2 && c.y1 < a.y2) { found.push([boxes[i].ele, boxes[j].ele]); }
      }
    }
    return found;
  }

  // Facts joining the same two entities: drawn on one line, their labels stacked one per row.
  function stackParallelLabels(cy) {
    var groups = {};
    cy.edges().forEach(function (e) {
      var key = [e.source().id(), e.target().id()].sort().join("\u0000");
      (groups[key] = groups[key] || []).push(e);
    });
    Object.keys(groups).forEach(function (key) {
      var group = groups[key];
      if (group.length < 2) { return; }
      // one straight line, so the labels share its midpoint and stack exactly
      group.forEach(function (e, i) { e.style({ "curve-style": "straight", "text-margin-y": (i - (group.length - 1) / 2) * 20 }); });
    });
  }

  function scaleFromCentre(cy, factor) {
    var bb = cy.nodes().boundingBox({ includeLabels: false }), cx = (bb.x1 + bb.x2) / 2, cy0 = (bb.y1 + bb.y2) / 2;
    cy.nodes().forEach(function (n) {
      var p = n.position();
      n.position({ x: cx + (p.x - cx) * factor, y: cy0 + (p.y - cy0) * factor });
    });
  }

  function ends(ele) { return ele.isNode() ? ele : ele.connectedNodes(); }

  function spreadLabels(cy) {
    for (var round = 1; round <= 400; round++) {
      var pairs = overlapping(labelBoxes(cy));
      if (!pairs.length) { return; }
      if (round % 40 === 0) { scaleFromCentre(cy, 1.15); continue; }  // stuck: more room for everyone
      var moves = {};
      pairs.forEach(function (pair) {
        var a = labelBox(pair[0]), c = labelBox(pair[1]);
        var dx = (a.x1 + a.x2 - c.x1 - c.x2) / 2, dy = (a.y1 + a.y2 - c.y1 - c.y2) / 2;
        if (Math.abs(dx) < 0.5 && Math.abs(dy) < 0.5) { dx = Math.random() - 0.5; dy = Math.random() - 0.5; }
        var len = Math.sqrt(dx * dx + dy * dy);
        // push along the axis that separates them sooner, by a few pixels
        var ox = Math.min(a.x2, c.x2) - Math.max(a.x1, c.x1), oy = Math.min(a.y2, c.y2) - Math.max(a.y1, c.y1);
        var step = Math.min(ox, oy) / 2 + 2;
        var ux = dx / len * step, uy = dy / len * step;
        [[pair[0], 1], [pair[1], -1]].forEach(function (side) {
          ends(side[0]).forEach(function (n) {
            var m = moves[n.id()] || (moves[n.id()] = { x: 0, y: 0 });
            m.x += side[1] * ux; m.y += side[1] * uy;
          });
        });
      });
      cy.nodes().forEach(function (n) {
        var m = moves[n.id()];
        if (m) { n.position({ x: n.position("x") + m.x, y: n.position("y") + m.y }); }
      });
    }
  }
})();
