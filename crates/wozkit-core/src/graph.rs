//! The state diagram of a study as DOT, Mermaid or SVG (laid out and drawn in-process by
//! layout-rs, so no Graphviz is needed). States are coloured by dialogue-act type; dashed edges
//! are world events (an action's completion unlocking or entering a state).
//!
//! The edges do not depend on the scenario (a draw changes values, never the state machine), so
//! one diagram serves every variant. Where the scenario enters is drawn on it: a note node for
//! the draw at the start (dotted edge to the initial state), and each state whose texts or
//! conditions read a drawn or computed variable lists them on a `varies:` line.

use crate::load::LoadedStudy;
use crate::model::{ActType, Effects};

fn colour(t: ActType) -> &'static str {
    match t {
        ActType::Request => "#f4b6b6",
        ActType::Interaction => "#b6d4f4",
        ActType::Action => "#c4e8b0",
        ActType::Update => "#f6e0a4",
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Edges: (from, to, dashed).
fn edges(study: &LoadedStudy) -> Vec<(String, String, bool)> {
    let st = &study.study;
    let mut out = vec![];
    let effect_edges = |from: &str, e: &Effects, out: &mut Vec<(String, String, bool)>| {
        for to in e.enter.iter().chain(e.unlock.iter()) {
            out.push((from.to_string(), to.clone(), true));
        }
    };
    for s in &st.states {
        for t in &s.transitions {
            out.push((s.id.clone(), t.to().to_string(), false));
        }
        effect_edges(&s.id, &s.effects, &mut out);
        if let Some(l) = &s.lock {
            effect_edges(&s.id, &l.on_approve, &mut out);
            effect_edges(&s.id, &l.on_deny, &mut out);
        }
    }
    for a in &st.actions {
        effect_edges(&format!("action_{}", a.id), &a.on_complete, &mut out);
    }
    out
}

/// The variables a draw sets: the drawn ones, then those `scenario.set` computes.
fn scenario_vars(study: &LoadedStudy) -> Vec<&str> {
    let sc = &study.study.scenario;
    sc.variables
        .keys()
        .chain(sc.set.keys())
        .map(String::as_str)
        .collect()
}

/// The scenario variables state `i` reads in its texts (templates, approval prompt) or its
/// conditions (its `when`, its transitions' `when`), sorted.
pub fn scenario_reads(study: &LoadedStudy, i: usize) -> Vec<String> {
    let vars = scenario_vars(study);
    if vars.is_empty() {
        return vec![];
    }
    let s = &study.study.states[i];
    let mut read: Vec<String> = vec![];
    let texts = s
        .templates
        .iter()
        .chain(s.lock.as_ref().and_then(|l| l.prompt.as_ref()));
    for t in texts {
        if let Ok(parts) = crate::slots::parse(t) {
            read.extend(crate::slots::names(&parts).map(str::to_string));
        }
    }
    let conditions = study
        .compiled
        .state_when
        .get(i)
        .into_iter()
        .flatten()
        .chain(
            study
                .compiled
                .transition_when
                .get(i)
                .into_iter()
                .flatten()
                .flatten(),
        );
    for c in conditions {
        read.extend(c.variables());
    }
    read.retain(|v| vars.contains(&v.as_str()));
    read.sort();
    read.dedup();
    read
}

/// Graphviz DOT.
pub fn to_dot(study: &LoadedStudy) -> String {
    let st = &study.study;
    let mut out = format!("digraph \"{}\" {{\n  rankdir=TB;\n", esc(&st.id));
    if !st.scenario.variables.is_empty()
        && let Some(initial) = st.states.get(study.compiled.initial)
    {
        let names: Vec<&str> = st.scenario.variables.keys().map(String::as_str).collect();
        out.push_str(&format!(
            "  \"scenario\" [label=\"scenario drawn at start\\n{}\", shape=note, style=filled, fillcolor=\"#eeeeee\"];\n  \"scenario\" -> \"{}\" [style=dotted];\n",
            esc(&names.join(", ")),
            esc(&initial.id)
        ));
    }
    for (i, s) in st.states.iter().enumerate() {
        let reads = scenario_reads(study, i);
        let varies = if reads.is_empty() {
            String::new()
        } else {
            format!("\\nvaries: {}", esc(&reads.join(", ")))
        };
        let shape = if s.terminal {
            "doublecircle"
        } else if s.initial {
            "circle"
        } else {
            "box"
        };
        let global = if s.global { " (global)" } else { "" };
        out.push_str(&format!(
            "  \"{}\" [label=\"{}\\n{}{}{}\", shape={}, style=filled, fillcolor=\"{}\"];\n",
            esc(&s.id),
            esc(s.label()),
            s.act_type.as_str(),
            global,
            varies,
            shape,
            colour(s.act_type)
        ));
    }
    for a in &st.actions {
        if a.on_complete.enter.is_some() || !a.on_complete.unlock.is_empty() {
            out.push_str(&format!(
                "  \"action_{}\" [label=\"robot: {}\", shape=hexagon, style=filled, fillcolor=\"#dddddd\"];\n",
                esc(&a.id), esc(&a.label)
            ));
        }
    }
    for (from, to, dashed) in edges(study) {
        let style = if dashed { " [style=dashed]" } else { "" };
        out.push_str(&format!(
            "  \"{}\" -> \"{}\"{};\n",
            esc(&from),
            esc(&to),
            style
        ));
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart.
pub fn to_mermaid(study: &LoadedStudy) -> String {
    let st = &study.study;
    let id = |s: &str| s.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_");
    let mut out = String::from("flowchart TD\n");
    for t in ActType::ALL {
        out.push_str(&format!("  classDef {} fill:{}\n", t.as_str(), colour(t)));
    }
    if !st.scenario.variables.is_empty()
        && let Some(initial) = st.states.get(study.compiled.initial)
    {
        let names: Vec<&str> = st.scenario.variables.keys().map(String::as_str).collect();
        out.push_str(&format!(
            "  scenario_draw>\"scenario drawn at start<br/>{}\"]\n  scenario_draw -.-> {}\n",
            names.join(", ").replace('"', "'"),
            id(&initial.id)
        ));
    }
    for (i, s) in st.states.iter().enumerate() {
        let reads = scenario_reads(study, i);
        let varies = if reads.is_empty() {
            String::new()
        } else {
            format!("<br/>varies: {}", reads.join(", "))
        };
        out.push_str(&format!(
            "  {}[\"{}<br/>{}{}\"]:::{}\n",
            id(&s.id),
            s.label().replace('"', "'"),
            s.act_type.as_str(),
            varies,
            s.act_type.as_str()
        ));
    }
    for a in &st.actions {
        if a.on_complete.enter.is_some() || !a.on_complete.unlock.is_empty() {
            out.push_str(&format!(
                "  action_{}{{{{\"robot: {}\"}}}}\n",
                id(&a.id),
                a.label.replace('"', "'")
            ));
        }
    }
    for (from, to, dashed) in edges(study) {
        let arrow = if dashed { "-.->" } else { "-->" };
        out.push_str(&format!("  {} {} {}\n", id(&from), arrow, id(&to)));
    }
    out
}

/// SVG drawn by layout-rs from the DOT text.
pub fn to_svg(study: &LoadedStudy) -> Result<String, String> {
    use layout::backends::svg::SVGWriter;
    use layout::gv::{DotParser, GraphBuilder};
    let dot = to_dot(study);
    let mut parser = DotParser::new(&dot);
    let graph = parser
        .process()
        .map_err(|e| format!("cannot lay out the diagram: {e}"))?;
    let mut builder = GraphBuilder::new();
    builder.visit_graph(&graph);
    let mut visual = builder.get();
    let mut svg = SVGWriter::new();
    visual.do_it(false, false, false, &mut svg);
    Ok(svg.finalize())
}
