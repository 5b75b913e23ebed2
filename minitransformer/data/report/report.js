// The report's script: it only adds interactivity to a page that is complete without it (html_report.py).
// Hover: the record under the pointer, read from the page's data. Choose a pass and a layer. Replay the answer.
function minitransformerReport(root) {
  "use strict";
  if (!root || root.classList.contains("js")) return;
  root.classList.add("js");
  // A number JSON cannot hold (NaN, an infinity) comes as {"mt-nonfinite": "NaN"} (html_report.py's NONFINITE)
  var text = root.querySelector("script.mt-data").textContent;
  var data = text.indexOf('"mt-nonfinite"') < 0 ? JSON.parse(text) : JSON.parse(text, function (key, value) {
    return value !== null && typeof value === "object" && "mt-nonfinite" in value ? Number(value["mt-nonfinite"]) : value;
  });
  var doc = data.document;
  var tip = root.querySelector(".tip");
  var layer = 0;

  function fmt(x) { return Number(x).toLocaleString("en-US"); }
  function dims(s) { return s ? "[" + s.join(", ") + "]" : ""; }
  function pct(part, whole) {
    if (!whole) return "";
    var share = 100 * part / whole;
    return share >= 0.05 || share === 0 ? share.toFixed(1) + "%" : "<0.1%";
  }

  // The run of folded layers that holds `layer` in a phase, or the first.
  function runOf(phase, wanted) {
    for (var i = 0; i < phase.layers.length; i++) {
      var run = phase.layers[i];
      if (wanted >= run.layer && wanted < run.layer + run.repeat) return i;
    }
    return 0;
  }

  // The layers a drawn block stands for (its .kind-view), or null outside one.
  function layersOf(el) {
    var view = el.closest ? el.closest(".kind-view") : null;
    return view ? view.getAttribute("data-layers").split(",").map(Number) : null;
  }

  // A record's name in the layer shown: the chosen one where the block stands for it, else the block's first.
  function recordText(r, run, phase, layers) {
    var name = r.name;
    if (run && name.indexOf("blocks." + run.layer + ".") === 0) {
      var shown = layers ? (layers.indexOf(layer) >= 0 ? layer : layers[0])
                : layer >= run.layer && layer < run.layer + run.repeat ? layer : run.layer;
      name = "blocks." + shown + "." + name.slice(("blocks." + run.layer + ".").length);
    }
    var lines = [name + "  (" + r.kind + ")", r.equation];
    if (r.kind === "matmul") {
      lines.push(dims(r.a_shape) + " x " + dims(r.b_shape) + (r.chunks ? " in " + r.chunks + " row chunk" + (r.chunks === 1 ? "" : "s") : "") +
                 " -> " + dims(r.out_shape) + (r.heads ? "  (" + r.heads + " heads)" : ""));
      var shortest = r.dot_length_min === undefined ? r.dot_length : r.dot_length_min;
      var longest = r.dot_length_max === undefined ? r.dot_length : r.dot_length_max;
      lines.push(fmt(r.dot_products) + " dot products of length " +
                 (shortest === longest ? fmt(longest) : fmt(shortest) + "-" + fmt(longest) +
                  " (each chunk's as long as the keys it sees)"));
      lines.push("= " + fmt(r.macs) + " MACs = " + fmt(r.flops) + " FLOPs");
      lines.push(pct(r.macs, phase.macs) + " of this pass's MACs");
      if (r.causal_macs !== undefined) {
        lines.push("causal: " + fmt(r.causal_dot_products) + " dot products, " + fmt(r.causal_macs) +
                   " MACs are work the mask keeps");
      }
      if (r.recurrent_macs !== undefined) {  // a scan in chunks: the same positions one at a time
        lines.push("recurrent form: " + fmt(r.recurrent_dot_products) + " dot products, " + fmt(r.recurrent_macs) +
                   " MACs (position by position)");
      }
    } else {
      lines.push("out " + dims(r.out_shape) + ": no dot products");
    }
    return lines.join("\n");
  }

  function phaseText(p) {
    var lines = [(p.phase === "prefill" ? "prefill" : "decode step " + p.step) + ": T = " + fmt(p.tokens) +
                 ", t = " + fmt(p.context),
                 fmt(p.dot_products) + " dot products, " + fmt(p.macs) + " MACs"];
    var steps = doc.cache && doc.cache.steps;
    if (steps) {
      for (var i = 0; i < steps.length; i++) {
        if (steps[i].step === p.step) {
          lines.push("with the " + (data.cache_name || "KV cache") + " " + fmt(steps[i].with_cache_macs) + " MACs");
          lines.push("without it " + fmt(steps[i].without_cache_macs) + " MACs");
        }
      }
    }
    return lines.join("\n");
  }

  function phaseAt(step) {
    for (var i = 0; i < doc.phases.length; i++) if (doc.phases[i].step === step) return doc.phases[i];
    return null;
  }

  function heatText(svg, event) {
    var image = svg.querySelector("image.heat");
    var box = image.getBoundingClientRect();
    var n = Number(svg.getAttribute("data-n"));
    var col = Math.floor((event.clientX - box.left) / box.width * n);
    var row = Math.floor((event.clientY - box.top) / box.height * n);
    if (row < 0 || col < 0 || row >= n || col >= n) return null;
    var att = data.attention;
    var head = Number(svg.getAttribute("data-head"));
    var weights = att.layers[svg.getAttribute("data-layer")][head];
    var pieces = (doc.prompt_pieces || []).concat(doc.new_pieces || []);
    var q = att.first + row, k = att.first + col;
    var w = weights[row * n + col];
    return "layer " + svg.getAttribute("data-layer") + ", head " + head + "\nquery " + q + " " +
           JSON.stringify(pieces[q] || "") + " -> key " + k + " " + JSON.stringify(pieces[k] || "") + "\n" +
           (w === null ? "masked: " + (k > q ? "the future" : "outside the window") : "weight " + w.toFixed(4));
  }

  function textFor(target, event) {
    var el = target.closest ? target.closest("[data-index], [data-run], [data-final], [data-step], [data-tip], svg.heatmap") : null;
    if (!el || !root.contains(el)) return null;
    if (el.matches("svg.heatmap")) return heatText(el, event);
    if (el.hasAttribute("data-tip")) return el.getAttribute("data-tip");
    if (el.hasAttribute("data-phase")) {
      var phase = doc.phases[Number(el.getAttribute("data-phase"))];
      if (el.hasAttribute("data-final")) return recordText(phase.logits, null, phase);
      var run = phase.layers[Number(el.getAttribute("data-run"))];
      if (el.hasAttribute("data-index")) {
        var r = run.ops[Number(el.getAttribute("data-index"))];
        return recordText(r, run, phase, layersOf(el));
      }
      if (run) {
        var which = el.hasAttribute("data-layer") ? "layer " + el.getAttribute("data-layer")
                  : "layers " + run.layer + ".." + (run.layer + run.repeat - 1) + ", each";
        return which + ": " + fmt(run.dot_products) + " dot products, " + fmt(run.macs) + " MACs, " +
               pct(run.macs, phase.macs) + " of the pass";
      }
    }
    if (el.hasAttribute("data-step") && !el.classList.contains("new-token")) {
      var p = phaseAt(Number(el.getAttribute("data-step")));
      if (p) return phaseText(p);
    }
    if (el.classList.contains("new-token")) {
      return "new token " + (Number(el.getAttribute("data-step")) + 1) + ", chosen by pass " + el.getAttribute("data-step");
    }
    return null;
  }

  root.addEventListener("mousemove", function (event) {
    var text = textFor(event.target, event);
    if (!text) { tip.hidden = true; return; }
    tip.textContent = text;
    tip.hidden = false;
    var x = event.clientX + 14, y = event.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 4) x = Math.max(4, event.clientX - w - 14);
    if (y + h > window.innerHeight - 4) y = Math.max(4, event.clientY - h - 14);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  });
  root.addEventListener("mouseleave", function () { tip.hidden = true; });

  // Choosing a pass shows its block; choosing a layer renames, highlights and picks the attention maps.
  var stepChoice = root.querySelector(".step-choice");
  var layerChoice = root.querySelector(".layer-choice");
  function showStep(step) {
    root.querySelectorAll(".phase-view").forEach(function (view) {
      view.classList.toggle("current", view.getAttribute("data-view") === String(step));
    });
    showLayer(layer);
  }
  function showLayer(chosen) {
    layer = chosen;
    // In each pass, the block of the chosen layer's kind: its drawing and its table, named after the layer.
    root.querySelectorAll(".phase-view").forEach(function (view) {
      var blocks = view.querySelectorAll(".kind-view");
      var found = null;
      blocks.forEach(function (block) {
        var here = layersOf(block).indexOf(chosen) >= 0;
        if (here && !found) found = block;
        block.classList.toggle("current", here && found === block);
      });
      if (!found && blocks.length) { found = blocks[0]; found.classList.add("current"); }
      blocks.forEach(function (block) {
        var name = block.querySelector(".layer-name");
        if (name) name.textContent = String(block === found && layersOf(block).indexOf(chosen) >= 0 ? chosen
                                                                                                 : layersOf(block)[0]);
      });
    });
    root.querySelectorAll("tr[data-layer]").forEach(function (row) {
      row.classList.toggle("current-layer", row.getAttribute("data-layer") === String(chosen));
    });
    root.querySelectorAll("tr[data-layers]").forEach(function (row) {
      var span = row.getAttribute("data-layers").split("-");
      row.classList.toggle("current-layer", chosen >= Number(span[0]) && chosen <= Number(span[1]));
    });
    var maps = root.querySelectorAll(".attn-layer");
    var found = false;
    maps.forEach(function (el) {
      var here = el.getAttribute("data-layer") === String(chosen);
      found = found || here;
      el.classList.toggle("current", here);
    });
    var missing = root.querySelector(".attn-missing");
    if (missing && maps.length) {
      if (!found) maps[0].classList.add("current");
      missing.hidden = found;
      missing.textContent = found ? "" : "Layer " + chosen + "'s attention was not kept; showing layer " +
        maps[0].getAttribute("data-layer") + ".";
    }
  }
  if (stepChoice) stepChoice.addEventListener("change", function () { showStep(Number(stepChoice.value)); });
  if (layerChoice) layerChoice.addEventListener("change", function () { showLayer(Number(layerChoice.value)); });
  if (doc.phases && doc.phases.length && doc.phases[0].layers) {
    var first = doc.phases[0].layers[runOf(doc.phases[0], 0)].layer;
    if (layerChoice) layerChoice.value = String(first);
    showLayer(first);
  }

  // Replay: the answer's tokens appear one by one, as the generation chose them.
  var replay = root.querySelector(".replay");
  if (replay) {
    replay.addEventListener("click", function () {
      var chips = root.querySelectorAll(".answer .new-token");
      chips.forEach(function (chip) { chip.classList.add("waiting"); });
      chips.forEach(function (chip, i) {
        setTimeout(function () { chip.classList.remove("waiting"); }, 300 * (i + 1));
      });
    });
  }
}
