//! Every eligible key's pass@k and pass^k columns and its section 8 entries, as a summary and a
//! progress event show them (`projections.assembly.key_figures`, the reference): made from the
//! run's state by `key_columns_of`, the `statistics` object written by `write_statistics`.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use super::json::{integer, known, optional_float, Items};
use super::run::RunState;
use super::task::Key;
use crate::passk::{estimates, hat_estimates, key_columns};
use crate::statistics::{Column, Entry};

/// `projections.fold.declarations.key_name`: "metric.output".
pub fn key_name(key: &Key) -> String {
    let mut name = String::with_capacity(key.0.len() + 1 + key.1.len());
    name.push_str(&key.0);
    name.push('.');
    name.push_str(&key.1);
    name
}

/// Eligible key name -> its key, names sorted (the reference's dict: of two keys of one name,
/// the later in the run's key order wins).
pub fn eligible_by_name(run: &RunState) -> BTreeMap<String, &Key> {
    run.passk.keys().map(|key| (key_name(key), key)).collect()
}

/// An eligible key's pass@k and pass^k columns (none where no task is measured).
pub struct KeyColumns<'a> {
    pub name: &'a str,
    pub measured: usize,
    pub at_k: Vec<Column>,
    pub hat_k: Vec<Column>,
}

/// Every eligible key's columns, by name, from the (n, c) of its measured tasks in summary
/// task order and its unmeasured ones (`attempts.task_tallies`, `passk.key_figures_of`).
pub fn key_columns_of<'a>(
    run: &RunState,
    order: &[usize],
    eligible: &'a BTreeMap<String, &Key>,
) -> Vec<KeyColumns<'a>> {
    // Each eligible key's place among the names (two keys of one name share it).
    let places: HashMap<&str, usize> = eligible.keys().enumerate().map(|(at, name)| (name.as_str(), at)).collect();
    let place: HashMap<&Key, usize> = run.passk.keys().map(|key| (key, places[key_name(key).as_str()])).collect();
    let mut measured: Vec<(Vec<(u64, u64)>, usize)> = vec![Default::default(); eligible.len()];
    for &at in order {
        let state = &run.tasks[at].state;
        for (key, &(n, c)) in state.keys.iter().zip(&state.counts) {
            if let Some(&at) = place.get(key) {
                let tallies = &mut measured[at];
                if n > 0 {
                    tallies.0.push((n as u64, c as u64));
                } else {
                    tallies.1 += 1;
                }
            }
        }
    }
    eligible
        .keys()
        .zip(measured)
        .map(|(name, (tallies, unmeasured))| KeyColumns {
            name,
            measured: tallies.len(),
            at_k: key_columns(&tallies, unmeasured, estimates),
            hat_k: key_columns(&tallies, unmeasured, hat_estimates),
        })
        .collect()
}

/// Section 8's entry (`statistics`): the figures as orjson writes floats given raw.
fn entry(out: &mut Vec<u8>, figures: &Entry) {
    let mut entry = Items::object(out);
    integer(entry.known(known!("k")), figures.k);
    integer(entry.known(known!("count")), figures.count);
    integer(entry.known(known!("nan_count")), figures.nan_count);
    optional_float(entry.known(known!("mean")), figures.mean);
    optional_float(entry.known(known!("stderr")), figures.stderr);
    optional_float(entry.known(known!("ci95_low")), figures.low);
    optional_float(entry.known(known!("ci95_high")), figures.high);
    entry.end();
}

/// `statistics` (section 8): every eligible key of `keys` with a measured task.
pub fn write_statistics(out: &mut Vec<u8>, keys: &[KeyColumns<'_>]) {
    let mut statistics = Items::object(out);
    for key in keys.iter().filter(|key| key.measured > 0) {
        let mut figures = Items::object(statistics.key(key.name));
        integer(figures.known(known!("tasks")), key.measured);
        for (field, columns) in [("pass_at_k", &key.at_k), ("pass_hat_k", &key.hat_k)] {
            let mut entries = Items::array(figures.key(field));
            for column in columns {
                entry(entries.item(), &column.entry);
            }
            entries.end();
        }
        figures.end();
    }
    statistics.end();
}
