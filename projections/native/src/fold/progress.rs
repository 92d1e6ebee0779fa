//! A run's `run.progress` event encoded, byte for byte what `events.codec.encode_payload`
//! (orjson, no option) makes of `projections.assembly.progress.progress` (the reference) for
//! the same state: EVENTS.md's fields in the reference's key order, the pass@k figures and
//! `statistics` from the very columns a summary shows (`key_figures`, SEMANTICS.md 7 and 8),
//! the verdicts from the run's tallies. O(tasks + attempts of the eligible keys), nothing kept
//! between events: a run of two tasks costs a few small allocations.

use std::collections::BTreeMap;

use super::json::{float, integer, known, null, optional_float, string, Items};
use super::key_figures::{eligible_by_name, key_columns_of, key_name, write_statistics};
use super::run::RunState;
use super::summary::{declared_tasks, summary_tasks};
use super::task::KeyTally;

/// Python's `round(value, digits)`: the double nearest the decimal of `digits` places that
/// `value` rounds to, halves to even on its exact binary value (CPython's `double_round`,
/// a correctly rounded dtoa then strtod), as Rust's exact formatting rounds and its parse
/// reads back. NaN and the infinities stay themselves.
fn python_round(value: f64, digits: usize) -> f64 {
    format!("{value:.digits$}").parse().expect("a float's formatted text reads back")
}

/// `RunState.span`: seconds between the earliest and latest `occurred_at` of the applied
/// events, compared as the reference's loop does (a held value wins a tie or a NaN).
fn span(run: &RunState) -> Option<f64> {
    let (mut first, mut last) = (run.first_at, run.last_at);
    for task in &run.tasks {
        if let Some(at) = task.first_at.filter(|&at| first.is_none_or(|held| at < held)) {
            first = Some(at);
        }
        if let Some(at) = task.last_at.filter(|&at| last.is_none_or(|held| at > held)) {
            last = Some(at);
        }
    }
    Some(last? - first?)
}

/// `progress._eta`: the seconds left at the rate so far; 0.0 once closed or every expected
/// trial is in, None without an expectation, a finished trial or a positive elapsed time.
fn eta(finished: i64, expected: Option<i64>, elapsed: Option<f64>, open: bool) -> Option<f64> {
    if !open || expected.is_some_and(|expected| finished >= expected) {
        return Some(0.0);
    }
    let (Some(expected), Some(elapsed)) = (expected, elapsed) else { return None };
    // Python's `not elapsed or elapsed <= 0`: a NaN goes on (and is written null).
    if finished == 0 || elapsed <= 0.0 {
        return None;
    }
    Some(python_round((expected - finished) as f64 * elapsed / finished as f64, 1))
}

/// The run's `run.progress` event number `seq`, appended to `out`. `elapsed`: seconds the run
/// has been going, for the ETA; None: the span of the applied events' `occurred_at`.
pub fn write_progress(out: &mut Vec<u8>, run: &RunState, seq: i64, elapsed: Option<f64>) {
    let declared = run.declarations.as_ref().map_or(&[][..], |declarations| &declarations.tasks[..]);
    let open = !run.closed();
    let pending = if open {
        declared.iter().filter(|(task_id, _)| !run.task(task_id).is_some_and(|task| task.touched())).count()
    } else {
        0
    };
    let order = summary_tasks(run, &declared_tasks(run));
    let with_attempts = order.iter().filter(|&&at| run.tasks[at].state.counts.iter().any(|&(n, _)| n != 0)).count();
    let eligible = eligible_by_name(run);
    let keys = key_columns_of(run, &order, &eligible);
    let finished = run.trials_completed + run.trials_failed;
    let expected = run
        .declarations
        .as_ref()
        .and_then(|declarations| declarations.attempts_per_task)
        .filter(|&attempts| attempts != 0)
        .map(|attempts| attempts * declared.len() as i64);

    let mut payload = Items::object(out);
    integer(payload.known(known!("schema_version")), 1);
    string(payload.known(known!("type")), "run.progress");
    string(payload.known(known!("run_id")), &run.run_id);
    integer(payload.known(known!("seq")), seq);
    string(payload.known(known!("status")), if open { "open" } else { "closed" });
    integer(payload.known(known!("event_count")), run.event_count);
    let mut tasks = Items::object(payload.known(known!("tasks")));
    integer(tasks.known(known!("declared")), declared.len());
    integer(tasks.known(known!("with_attempts")), with_attempts);
    integer(tasks.known(known!("pending")), pending);
    tasks.end();
    let mut trials = Items::object(payload.known(known!("trials")));
    integer(trials.known(known!("finished")), finished);
    integer(trials.known(known!("failed")), run.trials_failed);
    match expected {
        Some(expected) => integer(trials.known(known!("expected")), expected),
        None => null(trials.known(known!("expected"))),
    }
    let done = expected.filter(|&expected| expected != 0).map(|expected| {
        let share = 100.0 * finished as f64 / expected as f64;
        // Python's `min(100.0, share)`: 100.0 unless `share` is less.
        python_round(if share < 100.0 { share } else { 100.0 }, 2)
    });
    optional_float(trials.known(known!("percent_done")), done);
    trials.end();
    integer(payload.known(known!("scores_applied")), run.score_count);
    let mut pass_at_k = Items::object(payload.known(known!("pass_at_k")));
    for key in keys.iter().filter(|key| key.measured > 0) {
        let mut by_k = Items::object(pass_at_k.key(key.name));
        for column in &key.at_k {
            let figures = &column.entry;
            let mut shown = Items::object(by_k.key(itoa::Buffer::new().format(figures.k)));
            optional_float(shown.known(known!("mean")), figures.mean);
            integer(shown.known(known!("count")), figures.count);
            integer(shown.known(known!("nan_count")), figures.nan_count);
            shown.end();
        }
        by_k.end();
    }
    pass_at_k.end();
    write_statistics(payload.known(known!("statistics")), &keys);
    verdicts(payload.known(known!("verdicts")), run, open);
    match eta(finished, expected, elapsed.or_else(|| span(run)), open) {
        Some(seconds) => float(payload.known(known!("eta_seconds")), seconds),
        None => null(payload.known(known!("eta_seconds"))),
    }
    payload.end();
}

/// Per eligible key name, sorted (of two keys of one name, the later's), its run-wide verdict
/// counts; declared tasks nothing has arrived for are `pending` while the run is open, and
/// `unmeasured` no more.
fn verdicts(out: &mut Vec<u8>, run: &RunState, open: bool) {
    let by_name: BTreeMap<String, &KeyTally> = run.passk.iter().map(|(key, tally)| (key_name(key), tally)).collect();
    let mut verdicts = Items::object(out);
    for (name, tally) in &by_name {
        let waiting = if open { tally.pending } else { 0 };
        let mut counts = Items::object(verdicts.key(name));
        integer(counts.known(known!("solved")), tally.solved);
        integer(counts.known(known!("flaky")), tally.flaky);
        integer(counts.known(known!("failed")), tally.failed);
        integer(counts.known(known!("unmeasured")), tally.unmeasured - waiting);
        integer(counts.known(known!("pending")), waiting);
        counts.end();
    }
    verdicts.end();
}
