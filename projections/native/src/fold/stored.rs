//! A native run's stored form, as `projections.storage` (its reference) writes and reads it: a
//! task's record written (`write_task`, byte for byte `task_to_bytes`), at every checkpoint for
//! every task an event changed; a run made again of the parts `projections.storage` read and
//! checked (`restored`); and what a run holds in memory (`footprint`), for the worker's budget.
//! The run header, written by 1 event in 25 or fewer, is written in Python from the run's
//! fields (`projections.native_store`).

use std::mem::size_of;

use super::json::{self, known, Items};
use super::records::{record_size, MetricColumns, DENSE, NAMES, SPILLED};
use super::run::{Declarations, RunState, Task};
use super::task::{TaskState, METRICS};
use super::trial_ids::TrialIds;

// The fold holds a task's records in the machine's byte order, and the store keeps them
// little-endian: on a big-endian machine they would have to be reordered, as
// `MetricColumns.records_bytes` does.
#[cfg(target_endian = "big")]
compile_error!("the native fold writes its records as it holds them, which only a little-endian machine stores");

/// The version the records are written in: `projections.storage.VERSION` (the tests hold each
/// record to the one `task_to_bytes` writes, so a version bump there fails them here).
const VERSION: i64 = 5;

/// A fingerprint's bytes, and a log position's.
const PAIR: usize = 16;
const POSITION: usize = 8;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `data` as a JSON string of its base64, as `binascii.b2a_base64` spells it (the standard
/// alphabet, padded).
fn base64(out: &mut Vec<u8>, data: &[u8]) {
    let letter = |bits: u32| ALPHABET[(bits & 63) as usize];
    out.reserve(data.len().div_ceil(3) * 4 + 2);
    out.push(b'"');
    let mut triples = data.chunks_exact(3);
    for triple in &mut triples {
        let bits = u32::from(triple[0]) << 16 | u32::from(triple[1]) << 8 | u32::from(triple[2]);
        out.extend_from_slice(&[letter(bits >> 18), letter(bits >> 12), letter(bits >> 6), letter(bits)]);
    }
    match *triples.remainder() {
        [first] => {
            let bits = u32::from(first) << 16;
            out.extend_from_slice(&[letter(bits >> 18), letter(bits >> 12), b'=', b'=']);
        }
        [first, second] => {
            let bits = u32::from(first) << 16 | u32::from(second) << 8;
            out.extend_from_slice(&[letter(bits >> 18), letter(bits >> 12), letter(bits >> 6), b'=']);
        }
        _ => {}
    }
    out.push(b'"');
}

fn failed_count(task: &Task) -> usize {
    task.failed_trials.as_ref().map_or(0, Vec::len)
}

/// Task `task`'s record, as `projections.storage.task_to_bytes` writes the Python fold's task.
pub fn write_task(out: &mut Vec<u8>, task: &Task) {
    let state = &task.state;
    let failed = failed_count(task);
    let mut record = Items::object(out);
    json::integer(record.known(known!("v")), VERSION);
    json::integer(record.known(known!("first_score")), state.first_score);
    let touched: &[u8] = if task.touched() { b"true" } else { b"false" };
    record.known(known!("touched")).extend_from_slice(touched);
    json::integer(record.known(known!("trials_completed")), task.trial_positions.len() / POSITION - failed);
    json::integer(record.known(known!("trials_failed")), failed);
    json::optional_float(record.known(known!("first_at")), task.first_at);
    json::optional_float(record.known(known!("last_at")), task.last_at);
    let mut trials = Items::array(record.known(known!("trials")));
    for trial_id in state.trials.iter() {
        json::string(trials.item(), trial_id);
    }
    trials.end();
    let mut metrics = Items::object(record.known(known!("metrics")));
    for (name, columns) in &state.metrics {
        let mut metric = Items::object(metrics.key(name));
        let mut names = Items::array(metric.known(known!("names")));
        for output in columns.names.iter() {
            json::string(names.item(), output);
        }
        names.end();
        base64(metric.known(known!("records")), &columns.packed);
        match &columns.spilled {
            Some(spilled) => base64(metric.known(known!("spilled")), spilled),
            None => json::null(metric.known(known!("spilled"))),
        }
        metric.end();
    }
    metrics.end();
    let out = record.known(known!("failed"));
    match &task.failed_trials {
        None => json::null(out),
        Some(failed) => {
            let mut entries = Items::array(out);
            for (at, error_type, trial_id) in failed {
                let mut entry = Items::array(entries.item());
                json::integer(entry.item(), *at);
                json::string(entry.item(), error_type);
                json::string(entry.item(), trial_id);
                entry.end();
            }
            entries.end();
        }
    }
    base64(record.known(known!("events")), &task.events);
    base64(record.known(known!("trial_positions")), &task.trial_positions);
    record.end();
}

/// A metric as stored: (metric, output names, records, spilled cells).
pub type StoredMetric = (String, Vec<String>, Vec<u8>, Option<Vec<u8>>);

/// A task's record as `projections.storage` read it (a `TaskState` of its reading's fields).
pub struct StoredTask {
    pub task_id: String,
    pub first_score: i64,
    pub trials: Vec<String>,
    pub metrics: Vec<StoredMetric>,
    pub failed_trials: Option<Vec<(i64, String, String)>>,
    pub events: Vec<u8>,
    pub trial_positions: Vec<u8>,
    pub first_at: Option<f64>,
    pub last_at: Option<f64>,
}

/// The header's fields as `projections.storage` read them (the run.started aside: it is read
/// into the declarations).
pub struct StoredHeader {
    pub started_event_id: Option<String>,
    pub closed_reason: Option<String>,
    pub closed_position: i64,
    pub first_at: Option<f64>,
    pub last_at: Option<f64>,
    pub run_events: Vec<u8>,
    pub run_positions: Vec<u8>,
}

/// Why stored bytes cannot be the part they claim, worded as `projections.storage` words it.
fn damaged(what: &str, why: &str) -> String {
    format!("stored {what} is damaged ({why}); wipe the store and replay the topic")
}

fn whole(data: &[u8], size: usize, what: &str) -> Result<(), String> {
    if data.len().is_multiple_of(size) {
        return Ok(());
    }
    Err(damaged(what, &format!("{} bytes, not whole items of {size}", data.len())))
}

/// A metric's columns of its stored parts: checked as `MetricColumns.of_bytes` checks them,
/// and each row's trial among the task's `trials` (which the native fold reads by index).
fn columns_of((_, names, packed, spilled): StoredMetric, trials: usize, what: &str) -> Result<MetricColumns, String> {
    let columns = MetricColumns { packed, names: NAMES.shared(&names[..]), spilled: spilled.map(Box::new) };
    let size = record_size(columns.width());
    if !columns.packed.len().is_multiple_of(size) {
        return Err(damaged(
            what,
            &format!("{} bytes are not records of {} slots", columns.packed.len(), columns.width()),
        ));
    }
    if columns.spilled.is_some() != (names.len() > DENSE) {
        return Err(damaged(what, &format!("spilled cells do not go with {} names", names.len())));
    }
    if let Some(spilled) = &columns.spilled {
        whole(spilled, SPILLED, what)?;
        let cell =
            |at: usize, from: usize| u32::from_ne_bytes(spilled[at + from..at + from + 4].try_into().expect("4 bytes"));
        let out_of_range = (0..spilled.len()).step_by(SPILLED).any(|at| {
            cell(at, 0) as usize >= columns.len()
                || cell(at, 4) as usize >= names.len()
                || (cell(at, 4) as usize) < DENSE
        });
        if out_of_range {
            return Err(damaged(what, "a spilled cell names a row or an output it has not"));
        }
    }
    if columns.rows().any(|row| row.trial < 0 || row.trial as usize >= trials) {
        return Err(damaged(what, "a record names a trial the task has not"));
    }
    Ok(columns)
}

/// A task of its stored parts.
pub fn task_of(stored: StoredTask) -> Result<Task, String> {
    let what = format!("task '{}'", stored.task_id);
    whole(&stored.events, PAIR, &format!("{what} events"))?;
    whole(&stored.trial_positions, POSITION, &format!("{what} trial positions"))?;
    let mut state = TaskState::new(&stored.task_id);
    state.first_score = stored.first_score;
    let mut trials = TrialIds::default();
    for trial_id in &stored.trials {
        trials.push(trial_id);
    }
    state.trials = trials;
    for metric in stored.metrics {
        let name = METRICS.shared(metric.0.as_str());
        let columns = columns_of(metric, stored.trials.len(), &format!("{what}, metric '{}'", name.as_str()))?;
        state.metrics.push((name, columns));
    }
    Ok(Task {
        state,
        events: stored.events,
        trial_positions: stored.trial_positions,
        first_at: stored.first_at,
        last_at: stored.last_at,
        failed_trials: stored.failed_trials,
        stamp: 0,
    })
}

/// Run `run_id` of its stored parts (`projections.storage.restore`): `header` None where no
/// run-level event was applied; `tasks` in the store's order, each id once.
pub fn restored(
    run_id: &str,
    header: Option<StoredHeader>,
    declarations: Option<Declarations>,
    tasks: Vec<StoredTask>,
) -> Result<RunState, String> {
    let mut run = RunState::new(run_id);
    if let Some(header) = header {
        let what = format!("run '{run_id}' header");
        whole(&header.run_events, PAIR, &format!("{what} events"))?;
        whole(&header.run_positions, POSITION, &format!("{what} positions"))?;
        run.started_event_id = header.started_event_id;
        run.closed_reason = header.closed_reason;
        run.closed_position = header.closed_position;
        run.first_at = header.first_at;
        run.last_at = header.last_at;
        run.run_events = header.run_events;
        run.run_positions = header.run_positions;
    }
    run.declarations = declarations;
    let tasks = tasks.into_iter().map(task_of).collect::<Result<Vec<_>, _>>()?;
    let mut ids: Vec<&str> = tasks.iter().map(|task| task.state.task_id.as_str()).collect();
    ids.sort_unstable();
    if let Some(twice) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(format!("run '{run_id}' is given task '{}' twice; give each task's latest record once", twice[0]));
    }
    run.restore_tasks(tasks);
    Ok(run)
}

/// What a heap block costs besides the bytes asked for (the allocator's header and rounding), from above.
const BLOCK: usize = 16;
/// The run's Python object (`door::NativeRun`, which holds the state) besides the state, and
/// what holding it costs its holder: its id as a Python string, a map's slot (~300 B measured).
const HELD: usize = 1024;

fn vec_bytes<T>(held: &Vec<T>) -> usize {
    match held.capacity() {
        0 => 0,
        capacity => capacity * size_of::<T>() + BLOCK,
    }
}

fn string_bytes(held: &str) -> usize {
    held.len() + BLOCK
}

/// A BTreeMap's entry, its share of a node (half full at worst) with it.
fn tree_entry<K, V>() -> usize {
    2 * (size_of::<K>() + size_of::<V>())
}

fn task_bytes(task: &Task) -> usize {
    let state = &task.state;
    let mut held = string_bytes(&state.task_id) + state.trials.heap_bytes() + 2 * BLOCK;
    held += vec_bytes(&task.events) + vec_bytes(&task.trial_positions) + vec_bytes(&state.metrics);
    for (_, columns) in &state.metrics {
        held += vec_bytes(&columns.packed);
        held += columns.spilled.as_ref().map_or(0, |spilled| size_of::<Vec<u8>>() + BLOCK + vec_bytes(spilled));
    }
    if state.keys.unique() {
        held += vec_bytes(&state.keys)
            + state.keys.iter().map(|(metric, output)| string_bytes(metric) + string_bytes(output)).sum::<usize>();
    }
    held += vec_bytes(&state.counts);
    if let Some(failed) = &task.failed_trials {
        held += vec_bytes(failed);
        held += failed
            .iter()
            .map(|(_, error_type, trial_id)| string_bytes(error_type) + string_bytes(trial_id))
            .sum::<usize>();
    }
    held
}

/// The bytes run `run` holds in memory, estimated from above in O(tasks): its own buffers and
/// blocks, its tasks', its index of applied events, its tallies and its declarations with the
/// run.started they keep (`projections.footprint.footprint` is the Python fold's). What runs
/// share (declared keys and views, output and metric names) is counted by none of them.
pub fn footprint(run: &RunState) -> usize {
    let mut held = HELD + size_of::<RunState>() + string_bytes(&run.run_id);
    held +=
        run.started_event_id.as_deref().map_or(0, string_bytes) + run.closed_reason.as_deref().map_or(0, string_bytes);
    held += vec_bytes(&run.run_events) + vec_bytes(&run.run_positions) + vec_bytes(&run.tasks);
    held += run.applied.table_bytes() + BLOCK + run.task_index.heap_bytes();
    held += run.tasks.iter().map(task_bytes).sum::<usize>();
    held += run
        .passk
        .keys()
        .map(|(metric, output)| {
            tree_entry::<(String, String), super::task::KeyTally>() + string_bytes(metric) + string_bytes(output)
        })
        .sum::<usize>();
    if let Some(declarations) = &run.declarations {
        held += vec_bytes(&declarations.started) + vec_bytes(&declarations.tasks) + vec_bytes(&declarations.labels);
        held += declarations.tasks.iter().map(|(task_id, _)| string_bytes(task_id)).sum::<usize>();
        held += declarations.labels.iter().map(|(name, value)| string_bytes(name) + string_bytes(value)).sum::<usize>();
    }
    held
}
