//! The report as one self-contained HTML page: tables of every section and horizontal bar charts
//! drawn as inline SVG by `plotters` (SVG backend only, no fonts, no scripts). All text taken from
//! the data is escaped; the JSON report holds the same numbers unrounded.

use std::fmt::Write as _;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Report;
use super::evaluation::PairResult;
use super::judgments::JudgmentsReport;
use super::summary::{Describe, MeanSd};
use crate::leaderboard::SourcedLeaderboard;
use crate::stats::agreement::{CategoryAgreement, LabelAgreement};

/// One bar: its label, value and optional interval (error bar).
struct Bar {
    label: String,
    value: f64,
    interval: Option<(f64, f64)>,
}

/// Renders the page.
pub fn render_html(report: &Report) -> String {
    let mut page = String::new();
    page.push_str(HEAD);
    let _ = write!(
        page,
        "<h1>wozkit report</h1><p>{} dialogue sessions; outcome <code>{}</code>: {} of {} known \
         reached; {} votes ({} imported).{}</p>",
        report.sessions,
        esc(report.outcome),
        report.outcome_reached,
        report.outcome_known,
        report.leaderboard.as_ref().map_or(0, |l| l.board.votes),
        report.votes,
        filters(report)
    );
    interaction(&mut page, report);
    scenarios(&mut page, report);
    acts(&mut page, report);
    questionnaire(&mut page, report);
    correlations(&mut page, report);
    evaluation(&mut page, report);
    if let Some(j) = &report.judgments {
        judgments(&mut page, j);
    }
    if let Some(a) = &report.judge_agreement {
        super::judge_agreement::render(&mut page, a);
    }
    if let Some(g) = &report.goal_scores {
        super::goal_scores::render(&mut page, g);
    }
    if let Some(c) = &report.copilot {
        super::copilot::render(&mut page, c);
    }
    page.push_str("</body></html>\n");
    page
}

const HEAD: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>wozkit report</title><style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;\
padding:0 1rem;color:#222}table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px \
solid #ccc;padding:.2rem .5rem;text-align:right}th:first-child,td:first-child{text-align:left}\
h2{border-bottom:1px solid #ddd;margin-top:2rem}svg{display:block;margin:.5rem 0}</style></head>\
<body>";

fn filters(report: &Report) -> String {
    if report.filters.is_empty() {
        return String::new();
    }
    let list: Vec<String> = report
        .filters
        .iter()
        .map(|(k, v)| format!("<code>{}={}</code>", esc(k), esc(v)))
        .collect();
    format!(" Filters: {}.", list.join(", "))
}

/// The per-variant table: sessions, outcome, turns.
fn scenarios(page: &mut String, report: &Report) {
    if report.scenarios.is_empty() {
        return;
    }
    page.push_str(
        "<h2>Scenario variants</h2><table><tr><th>variant</th><th>sessions</th>\
         <th>outcome reached</th><th>turns mean (SD)</th><th>user turns</th>\
         <th>wizard turns</th><th>% wizard turns typed</th></tr>",
    );
    for v in &report.scenarios {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{} of {} ({})</td><td>{} ({})</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(&v.variant),
            v.sessions,
            v.outcome_reached,
            v.outcome_known,
            v.outcome_share
                .map_or_else(|| "–".to_string(), |s| format!("{:.0}%", s * 100.0)),
            num(v.turns.mean),
            num(v.turns.sd),
            num(v.user_turns.mean),
            num(v.wizard_turns.mean),
            num(v.wizard_typed_percent.mean),
        );
    }
    page.push_str("</table>");
}

fn interaction(page: &mut String, report: &Report) {
    let i = &report.interaction;
    let rows: [(&str, &MeanSd); 5] = [
        ("Turns", &i.turns),
        ("User turns", &i.user_turns),
        ("Wizard turns", &i.wizard_turns),
        ("Words per user turn", &i.user_words_per_turn),
        ("% wizard turns typed", &i.wizard_typed_percent),
    ];
    page.push_str("<h2>Interaction (per session)</h2><table><tr><th>feature</th><th>mean (SD)</th><th>n</th></tr>");
    for (name, stat) in rows {
        let _ = write!(
            page,
            "<tr><td>{name}</td><td>{} ({})</td><td>{}</td></tr>",
            num(stat.mean),
            num(stat.sd),
            stat.n
        );
    }
    page.push_str("</table>");
    let bars: Vec<Bar> = rows
        .iter()
        .take(4)
        .filter_map(|(name, s)| {
            let mean = s.mean?;
            let sd = s.sd.unwrap_or(0.0);
            Some(Bar {
                label: name.to_string(),
                value: mean,
                interval: Some(((mean - sd).max(0.0), mean + sd)),
            })
        })
        .collect();
    page.push_str(&chart("mean ± SD", &bars));
}

fn acts(page: &mut String, report: &Report) {
    let _ = write!(
        page,
        "<h2>Dialogue acts</h2><p>Act types as % of {} labelled wizard turns.</p>",
        report.labelled_wizard_turns
    );
    let bars: Vec<Bar> = report
        .da_types
        .iter()
        .filter_map(|(t, p)| Some(bar(t, (*p)?)))
        .collect();
    page.push_str(&chart("% of labelled wizard turns", &bars));
    for (role, top) in &report.top_acts {
        if top.is_empty() {
            continue;
        }
        let _ = write!(page, "<h3>Top {} {} acts</h3>", top.len(), esc(role));
        let bars: Vec<Bar> = top.iter().map(|a| bar(&a.label, a.count as f64)).collect();
        page.push_str(&chart("count", &bars));
    }
}

fn questionnaire(page: &mut String, report: &Report) {
    if report.questionnaire.is_empty() && report.unknown_questionnaires.is_empty() {
        return;
    }
    page.push_str(
        "<h2>Questionnaire</h2><p>Mean / median / mode / SD (n); one-tailed Mann-Whitney U, \
         outcome reached &gt; not reached.</p>",
    );
    let reversed: Vec<String> = report
        .questionnaire
        .iter()
        .filter_map(|q| {
            let r = q.reversed.as_ref()?;
            Some(format!(
                "<code>{}</code> ({}–{} scale, {} answers)",
                esc(&q.item),
                r.low,
                r.high,
                r.answers
            ))
        })
        .collect();
    if !reversed.is_empty() {
        let _ = write!(
            page,
            "<p data-testid=\"reversed-items\">Reverse-coded items, scored as low + high − answer \
             before every number below: {}.</p>",
            reversed.join(", ")
        );
    }
    if !report.unknown_questionnaires.is_empty() {
        let studies: Vec<String> = report
            .unknown_questionnaires
            .iter()
            .map(|s| format!("<code>{}</code>", esc(s)))
            .collect();
        let _ = write!(
            page,
            "<p data-testid=\"unknown-questionnaires\"><strong>Not reversed:</strong> the study \
             definition of {} was not given (<code>--study</code>), so its answers are used as \
             stored and any reverse-coded item of it is not reversed.</p>",
            studies.join(", ")
        );
    }
    page.push_str(
        "<table><tr><th>item</th><th>overall</th><th>reached</th><th>not reached</th>\
         <th>U</th><th>p</th></tr>",
    );
    for q in &report.questionnaire {
        let (u, p) = q
            .mann_whitney
            .as_ref()
            .map_or((None, None), |t| (Some(t.u), Some(t.p)));
        let mark = if q.reversed.is_some() {
            " (reversed)"
        } else {
            ""
        };
        let _ = write!(
            page,
            "<tr><td>{}{mark}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&q.item),
            describe(&q.overall),
            describe(&q.reached),
            describe(&q.not_reached),
            num(u),
            num(p)
        );
    }
    page.push_str("</table>");
}

fn correlations(page: &mut String, report: &Report) {
    if report.outcome_known == 0 {
        return;
    }
    page.push_str(
        "<h2>Outcome and act counts</h2><table><tr><th>act type</th><th>n</th>\
         <th>Pearson r</th><th>p</th><th>Spearman ρ</th><th>p</th></tr>",
    );
    for (t, c) in &report.correlations {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(t),
            c.n,
            num(c.pearson.map(|x| x.r)),
            num(c.pearson.map(|x| x.p)),
            num(c.spearman.map(|x| x.r)),
            num(c.spearman.map(|x| x.p))
        );
    }
    page.push_str("</table>");
}

fn evaluation(page: &mut String, report: &Report) {
    if let Some(lb) = &report.leaderboard {
        leaderboard(page, lb);
    }
    if !report.agreement.is_empty() {
        page.push_str("<h2>Agreement</h2><table><tr><th>ratings</th><th>units</th><th>Krippendorff α</th><th>Fleiss κ</th></tr>");
        for (name, a) in &report.agreement {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(name),
                a.units,
                num(a.krippendorff_alpha),
                num(a.fleiss_kappa)
            );
        }
        page.push_str("</table>");
    }
    if !report.satisfaction.is_empty() {
        page.push_str("<h2>Satisfaction per system</h2><table><tr><th>system</th><th>dialogues</th><th>satisfied</th><th>rate</th></tr>");
        for (system, s) in &report.satisfaction {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(system),
                s.dialogues,
                s.satisfied,
                num(Some(s.rate))
            );
        }
        page.push_str("</table>");
    }
}

/// The leaderboard of every battle, imported and live (`data-testid="report-leaderboard"`): where
/// the votes came from, the ranking and win-rate grid, each pair's binomial test, and the Elo and
/// Bradley-Terry charts.
fn leaderboard(page: &mut String, lb: &SourcedLeaderboard) {
    let sources: Vec<String> = lb
        .sources
        .iter()
        .map(|s| {
            let void = if s.void > 0 {
                format!(", {} void", s.void)
            } else {
                String::new()
            };
            format!(
                "<span data-source=\"{name}\"><code>{name}</code>: {} votes{void}</span>",
                s.votes,
                name = esc(&s.source)
            )
        })
        .collect();
    let _ = write!(
        page,
        "<h2>Leaderboard</h2><div data-testid=\"report-leaderboard\"><p>Every battle in one \
         ranking: live arena battles and comparisons (<code>live</code>) and the votes of \
         imported sessions (<code>import:FORMAT</code>). Sources: {}.</p>",
        sources.join("; ")
    );
    page.push_str(&crate::leaderboard::html_tables(&lb.board));
    let board = &lb.board;
    if !board.grid.is_empty() {
        win_rate_table(page, &board.grid);
        page.push_str("<h3>Elo</h3>");
        let elo: Vec<Bar> = board.systems.iter().map(|s| bar(&s.name, s.elo)).collect();
        page.push_str(&rating_chart("Elo rating", &elo));
        page.push_str("<h3>Bradley-Terry strength (95% bootstrap interval)</h3>");
        let bt: Vec<Bar> = board
            .systems
            .iter()
            .filter_map(|s| {
                Some(Bar {
                    label: s.name.clone(),
                    value: s.bt_strength?,
                    interval: s.ci_low.zip(s.ci_high),
                })
            })
            .collect();
        page.push_str(&chart("strength", &bt));
    }
    page.push_str("</div>");
}

/// The evaluation-study section: ratings with intervals, the win-rate grid, agreement, workers
/// and the flow's counts.
fn judgments(page: &mut String, j: &JudgmentsReport) {
    let _ = write!(
        page,
        "<h2>Evaluation judgments</h2><p>{} judgments ({} counted, {} void) from {} participants; \
         {} surplus, {} items returned; onboarding passed by {} of {}.{}</p>",
        j.judgments,
        j.counted,
        j.void,
        j.participant_logs,
        j.surplus,
        j.returned,
        j.onboarding.passed,
        j.onboarding.taken,
        screened(j)
    );
    ratings(page, j);
    if !j.win_rates.is_empty() {
        page.push_str("<h3>Pairwise comparisons (ACUTE-Eval)</h3>");
        win_rate_table(page, &j.win_rates);
    }
    worker_agreement(page, j);
    label_agreements(page, j);
    workers(page, j);
}

/// The table and chart of the ratings (counted judgments), when there are any.
fn ratings(page: &mut String, j: &JudgmentsReport) {
    if j.ratings.is_empty() {
        return;
    }
    page.push_str(
        "<h3>Ratings (counted judgments)</h3><table><tr><th>system</th><th>question</th>\
         <th>n</th><th>mean</th><th>SD</th><th>95% CI (t)</th></tr>",
    );
    let mut bars = Vec::new();
    for (system, questions) in &j.ratings {
        for (question, r) in questions {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} – {}</td></tr>",
                esc(system),
                esc(question),
                r.n,
                num(r.mean),
                num(r.sd),
                num(r.ci_low),
                num(r.ci_high)
            );
            if let Some(mean) = r.mean {
                bars.push(Bar {
                    label: format!("{system} · {question}"),
                    value: mean,
                    interval: r.ci_low.zip(r.ci_high),
                });
            }
        }
    }
    page.push_str("</table>");
    page.push_str(&chart("mean rating (95% CI)", &bars));
}

/// The table of agreement between workers on the ratings and comparisons.
fn worker_agreement(page: &mut String, j: &JudgmentsReport) {
    let agreements = j
        .rating_agreement
        .iter()
        .map(|(q, a)| (format!("rating: {q}"), a))
        .chain(
            j.comparison_agreement
                .iter()
                .map(|a| ("comparison: system chosen".to_string(), a)),
        );
    page.push_str("<h3>Agreement between workers</h3><table><tr><th>judgments</th><th>items</th><th>Krippendorff α</th></tr>");
    for (name, a) in agreements {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&name),
            a.units,
            num(a.krippendorff_alpha)
        );
    }
    page.push_str("</table>");
}

/// The table of the workers: judgments, gold accuracy, time and straight-lining.
fn workers(page: &mut String, j: &JudgmentsReport) {
    page.push_str(
        "<h3>Workers</h3><table><tr><th>participant</th><th>worker id</th><th>judgments</th>\
         <th>gold judged</th><th>gold correct</th><th>accuracy</th><th>median s</th>\
         <th>straight-lining</th></tr>",
    );
    for w in &j.workers {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.participant),
            esc(w.worker_id.as_deref().unwrap_or("–")),
            w.judgments,
            w.gold_judged,
            w.gold_correct,
            num(w.gold_accuracy),
            num(w.median_seconds),
            if w.straight_lining { "yes" } else { "" }
        );
    }
    page.push_str("</table>");
}

/// One table block of label agreement: its name, the overall numbers and each label's.
type LabelBlock<'a> = (
    String,
    &'a LabelAgreement,
    Vec<(String, &'a CategoryAgreement)>,
);

/// Agreement on categorical answers and on turn labels: one row overall, then one per label.
fn label_agreements(page: &mut String, j: &JudgmentsReport) {
    let mut tables: Vec<LabelBlock> = j
        .label_agreement
        .iter()
        .map(|(q, a)| {
            let per = a.categories.iter().map(|(l, c)| (l.clone(), c)).collect();
            (format!("answer: {q}"), a, per)
        })
        .collect();
    if let Some(t) = &j.turn_label_agreement {
        let per = t.labels.iter().map(|(l, c)| (l.clone(), c)).collect();
        tables.push(("turn labels (set ticked)".to_string(), &t.sets, per));
    }
    if let Some(a) = &j.span_agreement {
        let per = a.categories.iter().map(|(l, c)| (l.clone(), c)).collect();
        tables.push(("spans: slot of each marked character".to_string(), a, per));
    }
    if let Some(t) = &j.act_agreement {
        let per = t.labels.iter().map(|(l, c)| (l.clone(), c)).collect();
        tables.push((
            "dialogue acts of turns (set ticked)".to_string(),
            &t.sets,
            per,
        ));
    }
    if tables.is_empty() {
        return;
    }
    page.push_str(
        "<h3>Agreement on labels</h3><p>Nominal level. Per label: that label against all \
         others (turn labels and dialogue acts: ticked or not).</p><table class=\"label-agreement\"><tr>\
         <th>judgments</th><th>label</th><th>items</th><th>workers per item</th>\
         <th>labels given</th><th>Krippendorff α</th><th>Fleiss κ</th></tr>",
    );
    for (name, a, per) in tables {
        let raters = if a.raters_min == a.raters_max {
            a.raters_min.to_string()
        } else {
            format!("{}–{}", a.raters_min, a.raters_max)
        };
        let _ = write!(
            page,
            "<tr><td>{}</td><td>(all)</td><td>{}</td><td>{raters}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            esc(&name),
            a.units,
            a.labels,
            num(a.krippendorff_alpha),
            num(a.fleiss_kappa)
        );
        for (label, c) in per {
            let _ = write!(
                page,
                "<tr><td></td><td>{}</td><td>{}</td><td></td><td>{}</td><td>{}</td>\
                 <td>{}</td></tr>",
                esc(&label),
                c.units,
                c.given,
                num(c.krippendorff_alpha),
                num(c.fleiss_kappa)
            );
        }
    }
    page.push_str("</table>");
}

/// A table of pairwise win rates: per pair its wins, ties, A's win rate and binomial p.
fn win_rate_table(page: &mut String, pairs: &[PairResult]) {
    page.push_str(
        "<table><tr><th>A</th><th>B</th><th>A wins</th><th>B wins</th><th>ties</th>\
         <th>A win rate</th><th>binomial p</th></tr>",
    );
    for w in pairs {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.a),
            esc(&w.b),
            w.a_wins,
            w.b_wins,
            w.ties,
            num(w.a_win_rate),
            num(w.p)
        );
    }
    page.push_str("</table>");
}

fn screened(j: &JudgmentsReport) -> String {
    if j.screened_out.is_empty() {
        return String::new();
    }
    let list: Vec<String> = j
        .screened_out
        .iter()
        .map(|(reason, n)| format!("{n} ({})", esc(reason)))
        .collect();
    format!(" Screened out: {}.", list.join(", "))
}

fn bar(label: &str, value: f64) -> Bar {
    Bar {
        label: label.to_string(),
        value,
        interval: None,
    }
}

fn describe(d: &Describe) -> String {
    format!(
        "{} / {} / {} / {} ({})",
        num(d.mean),
        num(d.median),
        num(d.mode),
        num(d.sd),
        d.n
    )
}

pub(crate) fn num(value: Option<f64>) -> String {
    match value {
        Some(v) if v != 0.0 && v.abs() < 0.001 => format!("{v:.2e}"),
        Some(v) => format!("{v:.3}"),
        None => "–".to_string(),
    }
}

pub(crate) use wozkit_core::html::esc;

/// A horizontal bar chart as an SVG element, the first bar on top (empty when there is nothing
/// to draw).
fn chart(x_label: &str, bars: &[Bar]) -> String {
    if bars.is_empty() {
        return String::new();
    }
    match draw(x_label, bars, Baseline::Zero) {
        Ok(svg) => svg,
        Err(problem) => format!("<p>(chart not drawn: {})</p>", esc(&problem)),
    }
}

/// A chart of ratings around a common start (Elo), whose axis begins near the lowest bar so
/// the differences show.
fn rating_chart(x_label: &str, bars: &[Bar]) -> String {
    if bars.is_empty() {
        return String::new();
    }
    match draw(x_label, bars, Baseline::Lowest) {
        Ok(svg) => svg,
        Err(problem) => format!("<p>(chart not drawn: {})</p>", esc(&problem)),
    }
}

/// Where a chart's bars start.
#[derive(Clone, Copy, PartialEq)]
enum Baseline {
    Zero,
    Lowest,
}

fn draw(x_label: &str, bars: &[Bar], baseline: Baseline) -> Result<String, String> {
    let top = |b: &Bar| b.interval.map_or(b.value, |i| i.1.max(b.value));
    let (low, high) = match baseline {
        Baseline::Zero => {
            let high = bars.iter().map(top).fold(0.0_f64, f64::max);
            let low = bars.iter().map(|b| b.value).fold(0.0_f64, f64::min);
            (low, if high > 0.0 { high * 1.1 } else { 1.0 })
        }
        Baseline::Lowest => {
            let high = bars.iter().map(top).fold(f64::MIN, f64::max);
            let low = bars.iter().map(|b| b.value).fold(f64::MAX, f64::min);
            let pad = ((high - low) * 0.1).max(1.0);
            (low - pad, high + pad)
        }
    };
    let n = bars.len();
    let height = 60 + 28 * n as u32;
    let start = if baseline == Baseline::Zero { 0.0 } else { low };
    // Bar i sits in row n - 1 - i (rows count upwards), so the first bar is on top.
    let row = |i: usize| (n - 1 - i) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, height)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(44)
            .y_label_area_size(230)
            .build_cartesian_2d(low..high, 0.0..n as f64)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(x_label)
            .label_style(("sans-serif", 13))
            .y_labels(0)
            .draw()
            .map_err(|e| err(&e))?;
        let fill = RGBColor(70, 120, 180).filled();
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                Rectangle::new([(start, row(i) + 0.15), (b.value, row(i) + 0.85)], fill)
            }))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
                let (lo, hi) = b.interval?;
                let y = row(i) + 0.5;
                Some(PathElement::new(
                    vec![(lo, y), (hi, y)],
                    BLACK.stroke_width(2),
                ))
            }))
            .map_err(|e| err(&e))?;
        let style = TextStyle::from(("sans-serif", 13).into_font())
            .pos(Pos::new(HPos::Right, VPos::Center));
        for (i, b) in bars.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(low, row(i) + 0.5));
            root.draw(&Text::new(b.label.clone(), (x - 8, y), style.clone()))
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}
