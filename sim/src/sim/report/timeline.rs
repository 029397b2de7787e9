//! A picture of a run, for reports: a self-contained HTML page with
//! one inline SVG, a horizontal lane per task instance, the marks of what each
//! instance did (deliveries, holds, ticks, commits, aborts, stops, fences,
//! starts), the run-wide events (crashes, restarts, moves, hanging and
//! expired input transactions, the liveness phase) as faint full-height
//! lines, and an arrow for every claim that held a record back. A
//! violation is a red band across the lanes at the step it broke, labelled
//! with its invariant and listed above the picture; a delivery's tooltip
//! shows the record's stamp and, for each claim, whether its task had
//! delivered the claimed record before.
//!
//! The x axis is trace position, not time: only events that draw something
//! get a slot, one each, in trace order. Steps where nothing visible happened
//! (fetches, clock moves, input production) take no room, so a run that
//! idles for thousands of steps in its liveness phase stays compact, and
//! events of one step never sit on top of each other. The axis labels say
//! which step and wall-clock time a position stands for.
//!
//! Tooltips are SVG `<title>` children, so hovering works without a script.
//! The output depends only on its inputs (the trace, the title, the
//! violations and the stamps): same input, same bytes (ordered maps only,
//! fixed float precision).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::Arc;

use parsley::header::{self, STAMP_HEADER};
use parsley::TaskId;
use parsley::{App, Stamp, TopicName, Tp};

use crate::model::Cluster;
use crate::sim::checker::Violation;
use crate::sim::world::trace::{AbortCause, Entry, Event, InputOutcome, TaskAt, TxnRef};

/// Appends formatted text to a `String`; writing to a `String` cannot fail.
macro_rules! emit {
    ($out:expr, $($arg:tt)*) => {
        $out.write_fmt(format_args!($($arg)*)).expect("writing to a String")
    };
}

// Geometry, in SVG pixels.
/// Widest a slot gets: a delivery circle (7 px) plus a hair of air.
const SLOT_MAX: f64 = 9.0;
/// The plotting area stops growing here; long traces squeeze their slots.
const WIDTH_CAP: f64 = 6000.0;
/// Narrowest page, so the legend and the labels of a short trace fit.
const WIDTH_MIN: f64 = 1000.0;
const MARGIN_RIGHT: f64 = 24.0;
const LANE_H: f64 = 40.0;
const LEGEND_ROW_H: f64 = 20.0;
/// The legend wraps at about a screen's width, not at the (scrolling) width
/// of the picture, so all of it is in view at the start.
const LEGEND_WRAP: f64 = 1400.0;
/// At most this many rows of global-event labels, staggered so neighbours
/// do not overlap; a busy stretch overlaps rather than grow the band.
const GLOBAL_ROWS_MAX: usize = 4;
const GLOBAL_ROW_H: f64 = 13.0;
const AXIS_H: f64 = 34.0;
/// The row of violation labels, between the run-wide events and the axis.
const VIOLATION_ROW_H: f64 = 16.0;
/// At most this many violations are marked and listed.
const VIOLATIONS_MAX: usize = 20;
/// Axis labels at least this far apart.
const AXIS_SPACING: f64 = 110.0;
/// Lane labels are repeated this often on wide pictures, so a reader who
/// scrolled right still knows which lane is which.
const LABEL_REPEAT: f64 = 1200.0;
/// A rough width of one character of the 11 px sans-serif labels.
const CHAR_W: f64 = 6.0;

const HOLD: &str = "#f28e00";
const COMMIT: &str = "#2a9d3a";
const ABORT: &str = "#d62728";
const FENCE: &str = "#8e44ad";
const TICK: &str = "#555555";
const ARROW: &str = "#e07b00";
const ARROW_LATE: &str = "#d62728";
const VIOLATION: &str = "#d62728";
/// Colours of delivered topics, in topic order; none of them is used by
/// another mark (orange holds, green commits, red aborts, purple fences).
const TOPIC_COLORS: [&str; 6] = [
    "#1f77b4", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
];

/// A record's stamp as its log holds it: `None` when there is no such
/// record or its header does not decode.
pub type StampOf<'a> = &'a dyn Fn(&Tp, u64) -> Option<Stamp>;

/// The stamps of `cluster`'s records, for [`render_html`]: a record without
/// a stamp header claims nothing.
pub fn stamps_in(cluster: &Cluster) -> impl Fn(&Tp, u64) -> Option<Stamp> + '_ {
    move |tp, offset| {
        let record = cluster.log(tp).ok()?.record(offset)?;
        match record.header(STAMP_HEADER) {
            Some(bytes) => header::decode(bytes).ok(),
            None => Some(Stamp::empty()),
        }
    }
}

/// The stages' tick topics (T2), for [`render_html`]: the application says
/// which topics are tick topics, not their names.
pub fn tick_topics(app: &App) -> Vec<TopicName> {
    app.stages()
        .iter()
        .filter_map(|plan| plan.tick_topic.clone())
        .collect()
}

/// Renders `trace` as a self-contained HTML page with an inline SVG,
/// marking `violations` (the run's, first ones first) at the steps they
/// broke. With `stamps`, each delivery's tooltip shows the delivered
/// record's stamp and its claims. Deliveries of `tick_topics` (see
/// [`tick_topics`]) are drawn as ticks.
pub fn render_html(
    trace: &[Entry],
    title: &str,
    violations: &[Violation],
    stamps: Option<StampOf<'_>>,
    tick_topics: &[TopicName],
) -> String {
    let unshown = violations.len().saturating_sub(VIOLATIONS_MAX);
    let violations = &violations[..violations.len() - unshown];
    let facts = Facts::gather(trace, violations, tick_topics);
    let layout = Layout::new(trace, &facts);
    let mut svg = String::new();
    emit!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" \
         viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"sans-serif\" font-size=\"11\">\n",
        w = layout.width,
        h = layout.height,
    );
    defs(&mut svg);
    // Back to front: what covers a lane comes first, marks come last so
    // their tooltips win the hover.
    legend(&mut svg, &layout, &facts);
    lanes(&mut svg, &layout, &facts);
    axis(&mut svg, &layout, trace);
    global_events(&mut svg, &layout, trace);
    violation_bands(&mut svg, &layout, trace, &facts, violations);
    lifetimes(&mut svg, &layout, trace);
    hold_spans(&mut svg, &layout, trace, &facts);
    arrows(&mut svg, &layout, trace, &facts);
    lane_marks(&mut svg, &layout, trace, &facts, violations, stamps);
    violating_rings(&mut svg, &layout, trace, &facts);
    if layout.slots == 0 {
        emit!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#888\">nothing to draw: the trace has no visible events</text>\n",
            layout.left,
            layout.lanes_top + 20.0
        );
    }
    svg.push_str("</svg>\n");
    page(title, &summary(trace, &facts), violations, unshown, &svg)
}

/// How a transaction ended, as far as the trace tells.
#[derive(Clone, Debug)]
enum TxnEnd {
    Committed,
    Aborted(AbortCause),
}

/// A hold and the deliveries it connects: the claimed record's delivery
/// (`cause`) and the held record's own delivery after the hold (`held`).
struct HoldLink {
    hold: usize,
    held: Option<usize>,
    cause: Option<usize>,
}

/// What the marks need to know beyond their own event: how transactions
/// ended, which colour a topic gets, and which deliveries a hold connects.
struct Facts {
    txn_end: BTreeMap<TxnRef, TxnEnd>,
    topic_color: BTreeMap<String, &'static str>,
    links: Vec<HoldLink>,
    /// Delivery index to the hold that held it back, for its tooltip.
    held_by: BTreeMap<usize, usize>,
    lanes: Vec<TaskAt>,
    /// Per task, claimed tp and offset: the indices of its deliveries, in
    /// trace order, whichever instance made them.
    task_deliveries: BTreeMap<(Arc<TaskId>, Tp, u64), Vec<usize>>,
    /// The tps each task fetched or delivered: those it consumes.
    task_tps: BTreeSet<(Arc<TaskId>, Tp)>,
    /// Per violation, the trace entry where it broke.
    violation_at: Vec<Option<usize>>,
    /// Trace entry to the violations that broke there.
    violations_of: BTreeMap<usize, Vec<usize>>,
    /// The stamps the violations name, by record.
    named_stamps: BTreeMap<(Tp, u64), Stamp>,
    /// The stages' tick topics.
    tick_topics: Vec<TopicName>,
}

impl Facts {
    fn gather(trace: &[Entry], violations: &[Violation], tick_topics: &[TopicName]) -> Facts {
        let mut txn_end = BTreeMap::new();
        let mut topics = Vec::new();
        let mut deliveries: BTreeMap<(&TaskAt, &Tp, u64), Vec<usize>> = BTreeMap::new();
        let mut task_deliveries: BTreeMap<(Arc<TaskId>, Tp, u64), Vec<usize>> = BTreeMap::new();
        let mut task_tps = BTreeSet::new();
        let mut lanes = Vec::new();
        for (index, entry) in trace.iter().enumerate() {
            if let Some(at) = task_at(&entry.event) {
                lanes.push(at.clone());
            }
            if let Event::Fetched { at, tp, .. } | Event::Delivered { at, tp, .. } = &entry.event {
                task_tps.insert((Arc::clone(&at.task), tp.clone()));
            }
            match &entry.event {
                Event::Committed { txn, .. } => {
                    txn_end.insert(*txn, TxnEnd::Committed);
                }
                Event::Aborted { txn, cause, .. } => {
                    txn_end.insert(*txn, TxnEnd::Aborted(cause.clone()));
                }
                Event::Delivered { at, tp, offset, .. } => {
                    if !tick_topics.contains(&tp.topic) {
                        topics.push(tp.topic.as_str().to_string());
                    }
                    deliveries.entry((at, tp, *offset)).or_default().push(index);
                    task_deliveries
                        .entry((Arc::clone(&at.task), tp.clone(), *offset))
                        .or_default()
                        .push(index);
                }
                _ => {}
            }
        }
        lanes.sort();
        lanes.dedup();
        topics.sort();
        topics.dedup();
        let topic_color = topics
            .into_iter()
            .enumerate()
            .map(|(i, topic)| (topic, TOPIC_COLORS[i % TOPIC_COLORS.len()]))
            .collect();

        let mut links = Vec::new();
        let mut held_by = BTreeMap::new();
        for (hold, entry) in trace.iter().enumerate() {
            let Event::Held {
                at,
                tp,
                offset,
                claim,
                ..
            } = &entry.event
            else {
                continue;
            };
            // The held record's delivery is the first one after the hold:
            // an earlier delivery of the same offset was a previous attempt.
            let held = deliveries
                .get(&(at, tp, *offset))
                .and_then(|found| found.iter().copied().find(|&d| d > hold));
            // The claimed record's delivery: the last one before the held
            // record went through (the one that released it, after any
            // aborted attempts); failing that, the first one at all, which
            // shows up as a backwards (late) arrow.
            let cause = deliveries
                .get(&(at, &claim.tp, claim.offset))
                .and_then(|found| {
                    let before = held.unwrap_or(usize::MAX);
                    found
                        .iter()
                        .copied()
                        .rfind(|&d| d < before)
                        .or_else(|| found.first().copied())
                });
            if let Some(held) = held {
                held_by.insert(held, hold);
            }
            links.push(HoldLink { hold, held, cause });
        }
        let violation_at: Vec<Option<usize>> = violations
            .iter()
            .map(|violation| violation.entry_in(trace))
            .collect();
        let mut violations_of: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (violation, at) in violation_at.iter().enumerate() {
            if let Some(at) = at {
                violations_of.entry(*at).or_default().push(violation);
            }
        }
        let named_stamps = violations
            .iter()
            .filter_map(|violation| Some((violation.record.clone()?, violation.stamp.clone()?)))
            .collect();
        Facts {
            txn_end,
            topic_color,
            links,
            held_by,
            lanes,
            task_deliveries,
            task_tps,
            violation_at,
            violations_of,
            named_stamps,
            tick_topics: tick_topics.to_vec(),
        }
    }

    /// Whether `tp` is a partition of a tick topic.
    fn is_tick(&self, tp: &Tp) -> bool {
        self.tick_topics.contains(&tp.topic)
    }

    fn topic_color(&self, tp: &Tp) -> &'static str {
        if self.is_tick(tp) {
            return TICK;
        }
        self.topic_color
            .get(tp.topic.as_str())
            .copied()
            .unwrap_or(TOPIC_COLORS[0])
    }
}

/// Where everything goes: lanes top to bottom, slots left to right.
struct Layout {
    /// Lane index of each task instance, sorted by task then instance.
    lane_of: BTreeMap<TaskAt, usize>,
    /// The slot of each trace entry that draws something.
    slot_of: Vec<Option<usize>>,
    /// The trace entry in each slot.
    entry_of: Vec<usize>,
    slots: usize,
    slot_w: f64,
    /// Width of the lane-label gutter.
    left: f64,
    legend_top: f64,
    /// Where the legend wraps.
    legend_wrap: f64,
    global_top: f64,
    /// The label row of each run-wide event, by trace index.
    global_row: BTreeMap<usize, usize>,
    /// The top of the violation labels' row (empty without violations).
    violation_top: f64,
    lanes_top: f64,
    width: f64,
    height: f64,
}

impl Layout {
    fn new(trace: &[Entry], facts: &Facts) -> Layout {
        let lane_of: BTreeMap<TaskAt, usize> = facts
            .lanes
            .iter()
            .enumerate()
            .map(|(i, at)| (at.clone(), i))
            .collect();
        let mut slot_of = Vec::with_capacity(trace.len());
        let mut entry_of = Vec::new();
        for (index, entry) in trace.iter().enumerate() {
            if draws(&entry.event) {
                slot_of.push(Some(entry_of.len()));
                entry_of.push(index);
            } else {
                slot_of.push(None);
            }
        }
        let slots = entry_of.len();
        let longest = facts
            .lanes
            .iter()
            .map(|at| at.to_string().chars().count())
            .max()
            .unwrap_or(0);
        let left = (longest as f64 * CHAR_W + 24.0).max(110.0);
        let room = WIDTH_CAP - left - MARGIN_RIGHT;
        let slot_w = if slots == 0 {
            SLOT_MAX
        } else {
            SLOT_MAX.min(room / slots as f64)
        };
        let width = (left + slots as f64 * slot_w + MARGIN_RIGHT).max(WIDTH_MIN);
        let legend_top = 8.0;
        let legend_wrap = width.min(LEGEND_WRAP);
        let legend_rows = place_legend(&legend_items(facts), legend_wrap).1;
        let global_top = legend_top + legend_rows as f64 * LEGEND_ROW_H + 8.0;
        let slot_x = |slot: usize| left + (slot as f64 + 0.5) * slot_w;
        let (global_row, labels_end) = place_global_labels(trace, &slot_of, slot_x);
        let global_rows = global_row.values().map(|row| row + 1).max().unwrap_or(1);
        // A label near the end (the liveness phase, typically) must not be cut off.
        let width = width.max(labels_end + MARGIN_RIGHT);
        let violation_top = global_top + global_rows as f64 * GLOBAL_ROW_H + 8.0;
        let violation_h = if facts.violation_at.is_empty() {
            0.0
        } else {
            VIOLATION_ROW_H
        };
        let lanes_top = violation_top + violation_h + AXIS_H;
        let height = lanes_top + lane_of.len().max(1) as f64 * LANE_H + 12.0;
        Layout {
            lane_of,
            slot_of,
            entry_of,
            slots,
            slot_w,
            left,
            legend_top,
            legend_wrap,
            global_top,
            global_row,
            violation_top,
            lanes_top,
            width,
            height,
        }
    }

    /// The radius of a delivery: full size while slots are wide enough,
    /// smaller on a squeezed picture, so dense stretches read as density
    /// rather than as one blob.
    fn dot_r(&self) -> f64 {
        (self.slot_w * 0.45).clamp(2.2, 3.5)
    }

    fn slot_x(&self, slot: usize) -> f64 {
        self.left + (slot as f64 + 0.5) * self.slot_w
    }

    /// The x of a trace entry, if it draws something.
    fn x(&self, index: usize) -> Option<f64> {
        self.slot_of
            .get(index)
            .copied()
            .flatten()
            .map(|slot| self.slot_x(slot))
    }

    /// The x of the drawn entry nearest to entry `index`: its own, else the
    /// last drawn before it, else the first drawn after it.
    fn x_near(&self, index: usize) -> Option<f64> {
        let index = index.min(self.slot_of.len().checked_sub(1)?);
        let before = self.slot_of[..=index].iter().rev().find_map(|slot| *slot);
        let slot = before.or_else(|| self.slot_of[index..].iter().find_map(|slot| *slot))?;
        Some(self.slot_x(slot))
    }

    /// The middle line of a task instance's lane.
    fn y(&self, at: &TaskAt) -> Option<f64> {
        self.lane_of.get(at).map(|&lane| self.lane_y(lane))
    }

    fn lane_y(&self, lane: usize) -> f64 {
        self.lanes_top + (lane as f64 + 0.5) * LANE_H
    }

    fn lanes_bottom(&self) -> f64 {
        self.lanes_top + self.lane_of.len() as f64 * LANE_H
    }

    /// Where a mark of entry `index` on lane `at` goes.
    fn at(&self, index: usize, at: &TaskAt) -> Option<(f64, f64)> {
        Some((self.x(index)?, self.y(at)?))
    }
}

/// Whether an event draws a mark and so takes a slot on the x axis.
/// Fetches, clock moves, input records and quiet tick checks do not: they
/// are the bulk of a trace and would only stretch it.
fn draws(event: &Event) -> bool {
    match event {
        Event::InputProduced { .. }
        | Event::ClockAdvanced { .. }
        | Event::Fetched { .. }
        | Event::Withheld { .. }
        | Event::TickChecked { emitted: None, .. } => false,
        Event::InputTransaction { outcome, .. } => *outcome == InputOutcome::Hanging,
        _ => true,
    }
}

/// The task instance an event happened on, if any.
fn task_at(event: &Event) -> Option<&TaskAt> {
    event.task_at()
}

/// Escapes text for HTML and SVG, in content and in quoted attributes.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The first line of every tooltip: when it happened.
fn when(trace: &[Entry], index: usize) -> String {
    let entry = &trace[index];
    format!("step {}, {}", entry.step, clock(trace, entry.now))
}

/// Wall-clock time since the first event, the way the axis prints it.
fn clock(trace: &[Entry], now: i64) -> String {
    let start = trace.first().map_or(now, |entry| entry.now);
    format!("t+{:.3}s", (now - start) as f64 / 1000.0)
}

/// A `<title>` child: the tooltip of the element it sits in.
fn tooltip(lines: &[String]) -> String {
    format!("<title>{}</title>", esc(&lines.join("\n")))
}

fn defs(svg: &mut String) {
    emit!(
        svg,
        "<defs>\n\
         <marker id=\"arrowhead\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"{ARROW}\"/></marker>\n\
         <marker id=\"arrowhead-late\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"{ARROW_LATE}\"/></marker>\n\
         </defs>\n"
    );
}

// ---------------------------------------------------------------- legend

/// The kinds of sample the legend shows.
enum Sample {
    Delivery(&'static str),
    TickDelivery,
    Uncommitted,
    Hold,
    Arrow,
    TickEmitted,
    Bar(&'static Bar),
    Stopped,
    Started,
    Global,
    Violation,
}

fn legend_items(facts: &Facts) -> Vec<(Sample, String)> {
    let mut items: Vec<(Sample, String)> = facts
        .topic_color
        .iter()
        .map(|(topic, color)| (Sample::Delivery(color), format!("delivered {topic}")))
        .collect();
    items.extend([
        (Sample::TickDelivery, "tick delivered".to_string()),
        (
            Sample::Uncommitted,
            "delivered, transaction aborted or never committed".to_string(),
        ),
        (Sample::Hold, "held (until its delivery)".to_string()),
        (
            Sample::Arrow,
            "claim: cause delivered → held record delivered".to_string(),
        ),
        (Sample::TickEmitted, "tick emitted".to_string()),
        (Sample::Bar(&COMMIT_BAR), "commit".to_string()),
        (Sample::Bar(&ABORT_BAR), "abort".to_string()),
        (Sample::Bar(&FENCE_BAR), "fenced".to_string()),
        (Sample::Stopped, "task stopped".to_string()),
        (Sample::Started, "task started".to_string()),
        (Sample::Global, "run-wide event".to_string()),
    ]);
    if !facts.violation_at.is_empty() {
        items.push((
            Sample::Violation,
            "violation (hover for details)".to_string(),
        ));
    }
    items
}

/// Places legend items left to right, wrapping at the page width; returns
/// each item's (x, row) and the number of rows.
fn place_legend(items: &[(Sample, String)], width: f64) -> (Vec<(f64, usize)>, usize) {
    let start = 8.0;
    let mut x = start;
    let mut row = 0;
    let mut places = Vec::with_capacity(items.len());
    for (_, label) in items {
        let item_w = 22.0 + label.chars().count() as f64 * CHAR_W + 18.0;
        if x + item_w > width - MARGIN_RIGHT && x > start {
            x = start;
            row += 1;
        }
        places.push((x, row));
        x += item_w;
    }
    (places, row + 1)
}

fn legend(svg: &mut String, layout: &Layout, facts: &Facts) {
    let items = legend_items(facts);
    let (places, _) = place_legend(&items, layout.legend_wrap);
    svg.push_str("<g class=\"legend\">\n");
    for ((sample, label), (x, row)) in items.iter().zip(places) {
        let y = layout.legend_top + row as f64 * LEGEND_ROW_H + LEGEND_ROW_H / 2.0;
        let cx = x + 8.0;
        match sample {
            Sample::Delivery(color) => emit!(
                svg,
                "<circle cx=\"{cx:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{color}\"/>"
            ),
            Sample::TickDelivery => emit!(svg, "<path d=\"{}\" fill=\"{TICK}\"/>", diamond_d(cx, y, 5.0)),
            Sample::Uncommitted => emit!(
                svg,
                "<circle cx=\"{cx:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.3\" stroke=\"{}\" stroke-width=\"0.8\"/>",
                TOPIC_COLORS[0],
                TOPIC_COLORS[0]
            ),
            Sample::Hold => emit!(
                svg,
                "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{HOLD}\" stroke-width=\"1.5\" stroke-opacity=\"0.6\"/>\
                 <circle cx=\"{cx:.1}\" cy=\"{y:.1}\" r=\"4.5\" fill=\"white\" stroke=\"{HOLD}\" stroke-width=\"2\"/>",
                y + 7.0,
                cx + 12.0,
                y + 7.0
            ),
            Sample::Arrow => emit!(
                svg,
                "<path d=\"M{:.1},{:.1} Q{:.1},{:.1} {:.1},{:.1}\" fill=\"none\" stroke=\"{ARROW}\" stroke-width=\"1.3\" marker-end=\"url(#arrowhead)\"/>",
                cx - 6.0,
                y + 5.0,
                cx + 2.0,
                y - 12.0,
                cx + 10.0,
                y + 5.0
            ),
            Sample::TickEmitted => emit!(svg, "<path d=\"{}\" {TRIANGLE_STYLE}/>", triangle_d(cx, y + 4.0)),
            Sample::Bar(bar) => emit!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"16\" fill=\"{}\"/>",
                cx - bar.width / 2.0,
                y - 8.0,
                bar.width,
                bar.color
            ),
            Sample::Stopped => emit!(svg, "<path d=\"{}\" {CROSS_STYLE}/>", cross_d(cx, y)),
            Sample::Started => emit!(svg, "<path d=\"{}\" {BRACKET_STYLE}/>", bracket_d(cx, y)),
            Sample::Violation => emit!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"18\" fill=\"{VIOLATION}\" fill-opacity=\"0.15\"/>\
                 <line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"{VIOLATION}\" stroke-width=\"1.5\"/>",
                cx - 3.0,
                y - 9.0,
                y - 9.0,
                y + 9.0
            ),
            Sample::Global => emit!(
                svg,
                "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"{ABORT}\" stroke-width=\"1.5\" stroke-opacity=\"0.45\" stroke-dasharray=\"4 3\"/>",
                y - 9.0,
                y + 9.0
            ),
        }
        emit!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#333\">{}</text>\n",
            x + 20.0,
            y + 4.0,
            esc(label)
        );
    }
    svg.push_str("</g>\n");
}

// ------------------------------------------------------- lanes and axis

/// Lane backgrounds and labels. Instances of one task share a shade, so the
/// eye groups a task that moved between instances.
fn lanes(svg: &mut String, layout: &Layout, facts: &Facts) {
    svg.push_str("<g class=\"lanes\">\n");
    let mut shade = false;
    let mut previous_task = None;
    for (lane, at) in facts.lanes.iter().enumerate() {
        if previous_task.is_some() && previous_task != Some(&at.task) {
            shade = !shade;
        }
        previous_task = Some(&at.task);
        let top = layout.lanes_top + lane as f64 * LANE_H;
        let fill = if shade { "#eef2f7" } else { "#f8f9fb" };
        emit!(
            svg,
            "<rect x=\"0\" y=\"{top:.1}\" width=\"{:.0}\" height=\"{LANE_H:.1}\" fill=\"{fill}\"/>\
             <line x1=\"0\" y1=\"{:.1}\" x2=\"{:.0}\" y2=\"{:.1}\" stroke=\"#d0d5dd\" stroke-width=\"0.6\"/>\n",
            layout.width,
            top + LANE_H,
            layout.width,
            top + LANE_H
        );
        let y = layout.lane_y(lane);
        let name = esc(&at.to_string());
        emit!(
            svg,
            "<text class=\"lane-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-weight=\"bold\" fill=\"#222\">{name}</text>\n",
            layout.left - 10.0,
            y + 4.0
        );
        // Faint repeats along wide pictures, below the marks' middle band.
        let mut x = layout.left + LABEL_REPEAT;
        while x < layout.width - 100.0 {
            emit!(
                svg,
                "<text class=\"lane-label-repeat\" x=\"{x:.1}\" y=\"{:.1}\" font-size=\"9\" fill=\"#8a94a0\" stroke=\"#fff\" stroke-width=\"2.5\" stroke-opacity=\"0.8\" paint-order=\"stroke\">{name}</text>\n",
                top + LANE_H - 3.0
            );
            x += LABEL_REPEAT;
        }
    }
    svg.push_str("</g>\n");
}

/// The x axis, above the lanes: step and wall clock of a position, with a
/// faint grid line down through the lanes.
fn axis(svg: &mut String, layout: &Layout, trace: &[Entry]) {
    svg.push_str("<g class=\"axis\">\n");
    let top = layout.lanes_top;
    emit!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#666\" font-size=\"10\">step</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#666\" font-size=\"10\">clock</text>\n",
        layout.left - 10.0,
        top - 18.0,
        layout.left - 10.0,
        top - 6.0
    );
    emit!(
        svg,
        "<line x1=\"{:.1}\" y1=\"{top:.1}\" x2=\"{:.1}\" y2=\"{top:.1}\" stroke=\"#888\" stroke-width=\"0.8\"/>\n",
        layout.left,
        layout.width - MARGIN_RIGHT
    );
    if layout.slots == 0 {
        svg.push_str("</g>\n");
        return;
    }
    let every = (AXIS_SPACING / layout.slot_w).ceil().max(1.0) as usize;
    for slot in (0..layout.slots).step_by(every) {
        let entry = &trace[layout.entry_of[slot]];
        let x = layout.slot_x(slot);
        emit!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e1e5ea\" stroke-width=\"0.6\"/>\
             <line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{top:.1}\" stroke=\"#888\" stroke-width=\"0.8\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#444\" font-size=\"10\">{}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#888\" font-size=\"10\">{}</text>\n",
            top,
            layout.lanes_bottom(),
            top - 3.0,
            x + 2.0,
            top - 18.0,
            entry.step,
            x + 2.0,
            top - 6.0,
            esc(&clock(trace, entry.now))
        );
    }
    svg.push_str("</g>\n");
}

// --------------------------------------------------------- global events

/// A run-wide event: its colour, short label, whether its line is dashed.
fn global_style(event: &Event) -> Option<(&'static str, String, bool)> {
    Some(match event {
        Event::Crashed { instance } => (ABORT, format!("crash i{instance}"), true),
        Event::Restarted { instance } => (COMMIT, format!("restart i{instance}"), true),
        Event::Moved { task, from, to } => ("#1f5fa8", format!("move {task} i{from}→i{to}"), true),
        Event::InputTransaction {
            id,
            outcome: InputOutcome::Hanging,
        } => (HOLD, format!("hanging {id}"), true),
        Event::TransactionsExpired { ids } => ("#8c564b", format!("expired ×{}", ids.len()), true),
        Event::LivenessPhase => ("#000000", "liveness phase".to_string(), false),
        _ => return None,
    })
}

/// Gives each run-wide event's label the first row where it does not run
/// into the previous label of that row; when every row is taken, the row
/// whose last label ends first. Also returns where the rightmost label ends.
fn place_global_labels(
    trace: &[Entry],
    slot_of: &[Option<usize>],
    slot_x: impl Fn(usize) -> f64,
) -> (BTreeMap<usize, usize>, f64) {
    let mut row_end: Vec<f64> = Vec::new();
    let mut rows = BTreeMap::new();
    for (index, entry) in trace.iter().enumerate() {
        let (Some(slot), Some((_, label, _))) = (slot_of[index], global_style(&entry.event)) else {
            continue;
        };
        let x = slot_x(slot);
        let row = match row_end.iter().position(|&end| end < x - 2.0) {
            Some(row) => row,
            None if row_end.len() < GLOBAL_ROWS_MAX => {
                row_end.push(f64::NEG_INFINITY);
                row_end.len() - 1
            }
            None => (0..row_end.len())
                .min_by(|&a, &b| row_end[a].total_cmp(&row_end[b]))
                .unwrap_or(0),
        };
        row_end[row] = x + 4.0 + label.chars().count() as f64 * CHAR_W;
        rows.insert(index, row);
    }
    let end = row_end.iter().copied().fold(0.0, f64::max);
    (rows, end)
}

/// Run-wide events: a label in the band above the axis and a faint line
/// down through every lane, so what a crash or a move did to each lane lines
/// up under it.
fn global_events(svg: &mut String, layout: &Layout, trace: &[Entry]) {
    svg.push_str("<g class=\"global\">\n");
    for (index, entry) in trace.iter().enumerate() {
        let Some(x) = layout.x(index) else { continue };
        let (Some((color, label, dashed)), Some(&row)) =
            (global_style(&entry.event), layout.global_row.get(&index))
        else {
            continue;
        };
        let label_y = layout.global_top + (row as f64 + 1.0) * GLOBAL_ROW_H;
        let dash = if dashed {
            " stroke-dasharray=\"4 3\""
        } else {
            ""
        };
        let (width, opacity) = if dashed { (1.5, 0.45) } else { (2.0, 0.6) };
        let mut lines = vec![when(trace, index), entry.event.to_string()];
        if let Event::TransactionsExpired { ids } = &entry.event {
            lines.push(format!("ids: {}", ids.join(", ")));
        }
        let tip = tooltip(&lines);
        emit!(
            svg,
            "<g class=\"mark global-event\"><line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"{width}\" stroke-opacity=\"{opacity}\"{dash}/>\
             <text x=\"{:.1}\" y=\"{label_y:.1}\" fill=\"{color}\" font-size=\"10.5\">{}</text>{tip}</g>\n",
            label_y - 9.0,
            layout.lanes_bottom(),
            x + 3.0,
            esc(&label)
        );
    }
    svg.push_str("</g>\n");
}

// ------------------------------------------------------------ violations

/// A red band across every lane where each violation broke, its label in
/// the row above the axis (left out where it would run into the previous
/// one), and a tooltip with the violation and where the records it names
/// were at its step.
fn violation_bands(
    svg: &mut String,
    layout: &Layout,
    trace: &[Entry],
    facts: &Facts,
    violations: &[Violation],
) {
    if violations.is_empty() {
        return;
    }
    svg.push_str("<g class=\"violations\">\n");
    let (top, bottom) = (layout.violation_top, layout.lanes_bottom());
    let label_y = top + VIOLATION_ROW_H - 4.0;
    let mut label_end = f64::NEG_INFINITY;
    for (violation, at) in violations.iter().zip(&facts.violation_at) {
        let Some(x) = at.and_then(|at| layout.x_near(at)) else {
            continue;
        };
        let mut lines = vec![violation.to_string()];
        if let Some(at) = at {
            lines.push(format!("marked at {}", when(trace, *at)));
        }
        for related in &violation.related {
            lines.push(format!(
                "{}@{} ({}): {}",
                related.tp,
                related.offset,
                related.relation,
                related.whereabouts()
            ));
        }
        let width = layout.slot_w.max(3.0);
        emit!(
            svg,
            "<g class=\"violation\"><rect class=\"violation-band\" x=\"{:.1}\" y=\"{top:.1}\" width=\"{width:.1}\" height=\"{:.1}\" fill=\"{VIOLATION}\" fill-opacity=\"0.15\"/>\
             <line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"{VIOLATION}\" stroke-width=\"1.5\"/>",
            x - width / 2.0,
            bottom - top,
        );
        let label = format!(
            "✗ {} at step {}",
            violation.invariant.short(),
            violation.step
        );
        let label_w = label.chars().count() as f64 * CHAR_W;
        // Near the right edge the label goes to the left of its line.
        let (label_x, anchor) = if x + 3.0 + label_w > layout.width - MARGIN_RIGHT {
            (x - 3.0, "end")
        } else {
            (x + 3.0, "start")
        };
        let starts = if anchor == "end" {
            label_x - label_w
        } else {
            label_x
        };
        if starts > label_end {
            emit!(
                svg,
                "<text class=\"violation-label\" x=\"{label_x:.1}\" y=\"{label_y:.1}\" text-anchor=\"{anchor}\" fill=\"{VIOLATION}\" font-weight=\"bold\">{}</text>",
                esc(&label)
            );
            label_end = starts + label_w + 6.0;
        }
        emit!(svg, "{}</g>\n", tooltip(&lines));
    }
    svg.push_str("</g>\n");
}

/// A red ring around the mark where each violation broke, when that is a
/// mark on a lane, so the eye finds the delivery among its neighbours.
fn violating_rings(svg: &mut String, layout: &Layout, trace: &[Entry], facts: &Facts) {
    if facts.violations_of.is_empty() {
        return;
    }
    svg.push_str("<g class=\"violating\">\n");
    for &index in facts.violations_of.keys() {
        let Some((x, y)) = task_at(&trace[index].event).and_then(|at| layout.at(index, at)) else {
            continue;
        };
        emit!(
            svg,
            "<circle class=\"violating\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{:.1}\" fill=\"none\" stroke=\"{VIOLATION}\" stroke-width=\"2\" pointer-events=\"none\"/>\n",
            layout.dot_r() + 3.5
        );
    }
    svg.push_str("</g>\n");
}

// ------------------------------------------------------------ lane marks

/// A thin line along each lane from its first to its last mark: when that
/// task instance was alive and doing something.
fn lifetimes(svg: &mut String, layout: &Layout, trace: &[Entry]) {
    let mut span: BTreeMap<&TaskAt, (f64, f64)> = BTreeMap::new();
    for (index, entry) in trace.iter().enumerate() {
        let (Some(at), Some(x)) = (task_at(&entry.event), layout.x(index)) else {
            continue;
        };
        let (first, last) = span.entry(at).or_insert((x, x));
        *first = first.min(x);
        *last = last.max(x);
    }
    svg.push_str("<g class=\"lifetimes\">\n");
    for (at, (first, last)) in span {
        if let Some(y) = layout.y(at) {
            emit!(
                svg,
                "<line x1=\"{first:.1}\" y1=\"{y:.1}\" x2=\"{last:.1}\" y2=\"{y:.1}\" stroke=\"#b8c0ca\" stroke-width=\"1\"/>\n"
            );
        }
    }
    svg.push_str("</g>\n");
}

/// An orange band below the middle of the lane from when a record was first
/// seen held to when it was delivered: how long the claim made it wait.
/// Overlapping waits on one lane go on separate tracks a few pixels apart,
/// so each band can be followed from its hold to its end.
fn hold_spans(svg: &mut String, layout: &Layout, trace: &[Entry], facts: &Facts) {
    const TRACKS: usize = 3;
    let mut track_end: BTreeMap<&TaskAt, [f64; TRACKS]> = BTreeMap::new();
    svg.push_str("<g class=\"hold-spans\">\n");
    for link in &facts.links {
        let Event::Held { at, .. } = &trace[link.hold].event else {
            continue;
        };
        let (Some((x1, y)), Some(held)) = (layout.at(link.hold, at), link.held) else {
            continue;
        };
        let Some(x2) = layout.x(held) else { continue };
        let ends = track_end.entry(at).or_insert([f64::NEG_INFINITY; TRACKS]);
        let track = (0..TRACKS)
            .find(|&track| ends[track] < x1)
            .unwrap_or_else(|| {
                (0..TRACKS)
                    .min_by(|&a, &b| ends[a].total_cmp(&ends[b]))
                    .unwrap_or(0)
            });
        ends[track] = x2;
        let y = y + 6.0 + track as f64 * 2.5;
        emit!(
            svg,
            "<line x1=\"{x1:.1}\" y1=\"{y:.1}\" x2=\"{x2:.1}\" y2=\"{y:.1}\" stroke=\"{HOLD}\" stroke-width=\"1.5\" stroke-opacity=\"0.6\"/>\n"
        );
    }
    svg.push_str("</g>\n");
}

/// One arrow per claim that held a record: from the claimed record's
/// delivery to the held record's, arcing above the lane so it does not hide
/// the marks between them. A cause delivered only after the held record
/// would break causal delivery (I1): its arrow points backwards, in red.
fn arrows(svg: &mut String, layout: &Layout, trace: &[Entry], facts: &Facts) {
    svg.push_str("<g class=\"arrows\">\n");
    for link in &facts.links {
        let Event::Held {
            at,
            tp,
            offset,
            claim,
            ..
        } = &trace[link.hold].event
        else {
            continue;
        };
        let (Some(cause), Some(held)) = (link.cause, link.held) else {
            continue;
        };
        let (Some((x1, y)), Some(x2)) = (layout.at(cause, at), layout.x(held)) else {
            continue;
        };
        let late = cause > held;
        let lift = ((x2 - x1).abs() * 0.35).clamp(10.0, LANE_H - 4.0);
        let (color, head, class) = if late {
            (ARROW_LATE, "arrowhead-late", "arrow late")
        } else {
            (ARROW, "arrowhead", "arrow")
        };
        let mut lines = vec![format!(
            "claim {claim} held {tp}@{offset} on {at} from {}",
            when(trace, link.hold)
        )];
        lines.push(format!(
            "cause delivered at {}; held record delivered at {}",
            when(trace, cause),
            when(trace, held)
        ));
        if late {
            lines.push("the cause was delivered AFTER the record it held (I1)".to_string());
        }
        emit!(
            svg,
            "<path class=\"{class}\" d=\"M{x1:.1},{:.1} Q{:.1},{:.1} {x2:.1},{:.1}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.3\" stroke-opacity=\"0.85\" marker-end=\"url(#{head})\">{}</path>\n",
            y - 4.0,
            (x1 + x2) / 2.0,
            y - 4.0 - lift,
            y - 4.0,
            tooltip(&lines)
        );
    }
    svg.push_str("</g>\n");
}

/// The marks on the lanes, one per event that happened on a task instance.
fn lane_marks(
    svg: &mut String,
    layout: &Layout,
    trace: &[Entry],
    facts: &Facts,
    violations: &[Violation],
    stamps: Option<StampOf<'_>>,
) {
    svg.push_str("<g class=\"marks\">\n");
    for (index, entry) in trace.iter().enumerate() {
        let Some(at) = task_at(&entry.event) else {
            continue;
        };
        let Some((x, y)) = layout.at(index, at) else {
            continue;
        };
        let spot = Spot { index, x, y };
        let mut lines = vec![when(trace, index), entry.event.to_string()];
        for &violation in facts.violations_of.get(&index).into_iter().flatten() {
            lines.push(format!("VIOLATES {}", violations[violation]));
        }
        match &entry.event {
            Event::Delivered { .. } => {
                claims(&spot, trace, facts, stamps, &mut lines);
                delivery(svg, &spot, trace, facts, layout.dot_r(), &mut lines)
            }
            Event::Held { .. } => hold(svg, &spot, trace, facts, &mut lines),
            Event::TickChecked { .. } => tick_emitted(svg, x, y, &lines),
            Event::Committed { .. } => bar(svg, x, y, &COMMIT_BAR, &lines),
            Event::Aborted { .. } => bar(svg, x, y, &ABORT_BAR, &lines),
            Event::Fenced { .. } => bar(svg, x, y, &FENCE_BAR, &lines),
            Event::TaskStopped { .. } => stopped(svg, x, y, &lines),
            Event::TaskStarted { .. } => started(svg, x, y, &lines),
            _ => {}
        }
    }
    svg.push_str("</g>\n");
}

/// The tooltip lines of a delivery's stamp: the stamp, then each claim and
/// whether the delivering task had delivered the claimed record before
/// (on any of its instances; the last such delivery). Without a stamp
/// lookup, the stamp a violation names for the record, if any.
fn claims(
    spot: &Spot,
    trace: &[Entry],
    facts: &Facts,
    stamps: Option<StampOf<'_>>,
    lines: &mut Vec<String>,
) {
    let Event::Delivered { at, tp, offset, .. } = &trace[spot.index].event else {
        return;
    };
    let stamp = match stamps {
        Some(stamps) => stamps(tp, *offset),
        None => facts.named_stamps.get(&(tp.clone(), *offset)).cloned(),
    };
    let Some(stamp) = stamp else {
        if stamps.is_some() {
            lines.push("stamp: not in the log, or it does not decode".to_string());
        }
        return;
    };
    lines.push(format!("stamp {stamp}"));
    for claim in stamp.claims() {
        let key = (Arc::clone(&at.task), claim.tp.clone(), claim.offset);
        let before = facts.task_deliveries.get(&key).and_then(|found| {
            let earlier = found.partition_point(|&delivery| delivery < spot.index);
            earlier.checked_sub(1).map(|last| found[last])
        });
        let state = match before {
            Some(delivery) => {
                let Event::Delivered { at: by, txn, .. } = &trace[delivery].event else {
                    continue;
                };
                let ended = match facts.txn_end.get(txn) {
                    Some(TxnEnd::Committed) => "committed",
                    Some(TxnEnd::Aborted(_)) => "aborted",
                    None => "never committed",
                };
                format!(
                    "delivered at step {} on {by} ({ended})",
                    trace[delivery].step
                )
            }
            None if facts
                .task_tps
                .contains(&(Arc::clone(&at.task), claim.tp.clone())) =>
            {
                format!("NOT delivered by task {} before", at.task)
            }
            None => format!("on a tp task {} does not consume", at.task),
        };
        lines.push(format!("claim {claim}: {state}"));
    }
}

/// Where a lane mark goes, and which trace entry it draws.
struct Spot {
    index: usize,
    x: f64,
    y: f64,
}

/// A delivery: a circle in its topic's colour, a grey diamond for a tick.
/// Deliveries whose transaction did not commit are washed out: the world
/// forgot them.
fn delivery(
    svg: &mut String,
    spot: &Spot,
    trace: &[Entry],
    facts: &Facts,
    r: f64,
    lines: &mut Vec<String>,
) {
    let Event::Delivered { txn, tp, .. } = &trace[spot.index].event else {
        return;
    };
    let committed = match facts.txn_end.get(txn) {
        Some(TxnEnd::Committed) => {
            lines.push("transaction committed".to_string());
            true
        }
        Some(TxnEnd::Aborted(cause)) => {
            lines.push(format!("transaction aborted ({cause:?})"));
            false
        }
        None => {
            lines.push("transaction never committed".to_string());
            false
        }
    };
    if let Some(&hold) = facts.held_by.get(&spot.index) {
        if let Event::Held { claim, .. } = &trace[hold].event {
            lines.push(format!("held on {claim} since {}", when(trace, hold)));
        }
    }
    let color = facts.topic_color(tp);
    let fill = if committed {
        String::new()
    } else {
        format!(" fill-opacity=\"0.3\" stroke=\"{color}\" stroke-width=\"0.8\"")
    };
    let tip = tooltip(lines);
    let Spot { x, y, .. } = *spot;
    if facts.is_tick(tp) {
        emit!(
            svg,
            "<path class=\"delivery tick mark\" d=\"{}\" fill=\"{color}\"{fill}>{tip}</path>\n",
            diamond_d(x, y, r * 1.4)
        );
    } else {
        emit!(
            svg,
            "<circle class=\"delivery mark\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"{color}\"{fill}>{tip}</circle>\n"
        );
    }
}

/// A hold: an open orange circle where the record was first seen held.
fn hold(svg: &mut String, spot: &Spot, trace: &[Entry], facts: &Facts, lines: &mut Vec<String>) {
    // Links are in trace order, one per hold.
    let delivered = facts
        .links
        .binary_search_by_key(&spot.index, |link| link.hold)
        .ok()
        .and_then(|found| facts.links[found].held);
    lines.push(match delivered {
        Some(held) => format!("delivered at {}", when(trace, held)),
        None => "not delivered after this".to_string(),
    });
    emit!(
        svg,
        "<circle class=\"hold mark\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"white\" fill-opacity=\"0.6\" stroke=\"{HOLD}\" stroke-width=\"2\">{}</circle>\n",
        spot.x,
        spot.y,
        tooltip(lines)
    );
}

/// A tick emitted: a small triangle above the lane's middle.
fn tick_emitted(svg: &mut String, x: f64, y: f64, lines: &[String]) {
    path_mark(
        svg,
        "tick-emitted",
        &triangle_d(x, y - 7.0),
        TRIANGLE_STYLE,
        lines,
    );
}

/// A kind of vertical bar across a lane.
struct Bar {
    class: &'static str,
    color: &'static str,
    width: f64,
    height: f64,
}

const COMMIT_BAR: Bar = Bar {
    class: "commit",
    color: COMMIT,
    width: 2.5,
    height: 22.0,
};
const ABORT_BAR: Bar = Bar {
    class: "abort",
    color: ABORT,
    width: 2.5,
    height: 22.0,
};
/// Taller and wider than a commit: the instance lost the task here.
const FENCE_BAR: Bar = Bar {
    class: "fenced",
    color: FENCE,
    width: 3.5,
    height: LANE_H - 8.0,
};

/// A vertical bar across the lane: commit, abort, fence.
fn bar(svg: &mut String, x: f64, y: f64, bar: &Bar, lines: &[String]) {
    emit!(
        svg,
        "<rect class=\"{} mark\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\">{}</rect>\n",
        bar.class,
        x - bar.width / 2.0,
        y - bar.height / 2.0,
        bar.width,
        bar.height,
        bar.color,
        tooltip(lines)
    );
}

/// A task stopped on bad input or failing logic: a black X.
fn stopped(svg: &mut String, x: f64, y: f64, lines: &[String]) {
    path_mark(svg, "stopped", &cross_d(x, y), CROSS_STYLE, lines);
}

/// A task started on an instance: a left bracket opening its lane.
fn started(svg: &mut String, x: f64, y: f64, lines: &[String]) {
    path_mark(svg, "started", &bracket_d(x, y), BRACKET_STYLE, lines);
}

/// A path mark with its tooltip.
fn path_mark(svg: &mut String, class: &str, d: &str, style: &str, lines: &[String]) {
    emit!(
        svg,
        "<path class=\"{class} mark\" d=\"{d}\" {style}>{}</path>\n",
        tooltip(lines)
    );
}

// Shapes shared by the marks and the legend: path data and paint.

/// Filled with `TICK`, like the diamond of a tick delivery.
const TRIANGLE_STYLE: &str = "fill=\"#555555\"";
const CROSS_STYLE: &str = "stroke=\"#000\" stroke-width=\"2.5\"";
const BRACKET_STYLE: &str = "fill=\"none\" stroke=\"#222\" stroke-width=\"2\"";

fn diamond_d(x: f64, y: f64, r: f64) -> String {
    format!(
        "M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} z",
        y - r,
        x + r,
        y + r,
        x - r
    )
}

fn triangle_d(x: f64, y: f64) -> String {
    format!(
        "M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} z",
        y - 5.0,
        x + 4.0,
        y + 2.0,
        x - 4.0,
        y + 2.0
    )
}

fn cross_d(x: f64, y: f64) -> String {
    format!(
        "M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}",
        x - 6.0,
        y - 6.0,
        x + 6.0,
        y + 6.0,
        x - 6.0,
        y + 6.0,
        x + 6.0,
        y - 6.0
    )
}

fn bracket_d(x: f64, y: f64) -> String {
    format!(
        "M{:.1},{:.1} H{:.1} V{:.1} H{:.1}",
        x + 3.0,
        y - 11.0,
        x - 1.0,
        y + 11.0,
        x + 3.0
    )
}

// ------------------------------------------------------------------ page

/// One line of counts under the title.
fn summary(trace: &[Entry], facts: &Facts) -> String {
    let mut deliveries = 0;
    let mut uncommitted = 0;
    let mut holds = 0;
    let mut commits = 0;
    let mut aborts = 0;
    for entry in trace {
        match &entry.event {
            Event::Delivered { txn, .. } => {
                deliveries += 1;
                if !matches!(facts.txn_end.get(txn), Some(TxnEnd::Committed)) {
                    uncommitted += 1;
                }
            }
            Event::Held { .. } => holds += 1,
            Event::Committed { .. } => commits += 1,
            Event::Aborted { .. } => aborts += 1,
            _ => {}
        }
    }
    let arrows = facts
        .links
        .iter()
        .filter(|link| link.cause.is_some() && link.held.is_some())
        .count();
    let steps = match (trace.first(), trace.last()) {
        (Some(first), Some(last)) => format!("steps {}–{}", first.step, last.step),
        _ => "no steps".to_string(),
    };
    format!(
        "{} events over {steps}; {} task instances; {deliveries} deliveries \
         ({uncommitted} not committed), {holds} holds ({arrows} with both ends drawn), \
         {commits} commits, {aborts} aborts. Hover a mark for details; the x axis is trace \
         order, one slot per drawn event.",
        trace.len(),
        facts.lanes.len()
    )
}

/// The page: its title, the summary, the violations marked (and how many
/// more there were) and the picture.
fn page(title: &str, summary: &str, violations: &[Violation], unshown: usize, svg: &str) -> String {
    let title = esc(title);
    let mut listed = String::new();
    if !violations.is_empty() {
        listed.push_str("<ul class=\"violations\">\n");
        for violation in violations {
            emit!(listed, "<li>{}</li>\n", esc(&violation.to_string()));
        }
        if unshown > 0 {
            emit!(listed, "<li>… and {unshown} more, not marked</li>\n");
        }
        listed.push_str("</ul>\n");
    }
    let mut html = String::with_capacity(svg.len() + listed.len() + 2048);
    emit!(
        html,
        "<!DOCTYPE html>\n\
         <html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n\
         <style>\n\
         body {{ margin: 16px; font-family: sans-serif; color: #222; background: #fff; }}\n\
         h1 {{ font-size: 18px; margin: 0 0 4px 0; }}\n\
         p.summary {{ font-size: 13px; color: #555; margin: 0 0 10px 0; }}\n\
         ul.violations {{ font-size: 13px; color: {VIOLATION}; margin: 0 0 10px 0; padding-left: 20px; }}\n\
         div.timeline {{ overflow-x: auto; border: 1px solid #d0d5dd; }}\n\
         svg {{ display: block; }}\n\
         .mark:hover {{ stroke: #000; stroke-width: 2; }}\n\
         path.arrow:hover {{ stroke-width: 3; }}\n\
         </style>\n</head>\n<body>\n\
         <h1>{title}</h1>\n<p class=\"summary\">{}</p>\n{listed}\
         <div class=\"timeline\">\n{svg}</div>\n</body>\n</html>\n",
        esc(summary)
    );
    html
}
