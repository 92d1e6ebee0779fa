//! A task's scores of one metric as packed records, byte for byte those of
//! `projections.packed.records.MetricColumns` (its reference): one record per score, in log
//! order, `=iBq` (trial index, status, run sequence number) then one `=Bd` slot (kind, semantic
//! value) per output name up to `DENSE`; the cells of names past them apart, `=iIBd` (row,
//! name's index, kind, value). Native byte order, no padding: what the store writes on a
//! little-endian machine, and what the Python fold holds in memory.

use std::sync::LazyLock;

use super::sharing::{Recent, Shared};
use super::snug;

pub const OK: u8 = 0;
pub const TRIAL_FAILED: u8 = 1;
pub const METRIC_FAILED: u8 = 2;

pub const NON_SEMANTIC: u8 = 0;
pub const BOOLEAN: u8 = 1;
pub const NUMERIC: u8 = 2;
pub const ABSENT: u8 = 255;

pub const DENSE: usize = 8;
const ROW: usize = 4 + 1 + 8;
const SLOT: usize = 1 + 8;
pub const SPILLED: usize = 4 + 4 + 1 + 8;

/// An output value as the fold classifies it (`records.classify`): its kind and semantic value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    pub kind: u8,
    pub value: f64,
}

impl Cell {
    pub const LABEL: Cell = Cell { kind: NON_SEMANTIC, value: 0.0 };

    pub fn boolean(value: bool) -> Cell {
        Cell { kind: BOOLEAN, value: if value { 1.0 } else { 0.0 } }
    }

    pub fn number(value: f64) -> Cell {
        Cell { kind: NUMERIC, value }
    }

    pub fn semantic(self) -> bool {
        self.kind != NON_SEMANTIC && self.kind != ABSENT
    }
}

/// One record's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub trial: i32,
    pub status: u8,
    pub seq: i64,
}

pub fn record_size(width: usize) -> usize {
    ROW + SLOT * width
}

#[derive(Clone, Debug, PartialEq)]
pub struct MetricColumns {
    pub packed: Vec<u8>,
    /// One value for the metrics, of any task, whose names are alike (most are).
    pub names: Shared<Vec<String>>,
    /// None: no name past `DENSE`. Boxed: most metrics have none, and a metric's columns are
    /// kept per task (16 bytes less each).
    #[allow(clippy::box_collection)]
    pub spilled: Option<Box<Vec<u8>>>,
}

/// The output names of the metrics lately given one.
pub(super) static NAMES: Recent<Vec<String>> = Recent::new();
static NO_NAMES: LazyLock<Shared<Vec<String>>> = LazyLock::new(Shared::default);

impl Default for MetricColumns {
    fn default() -> Self {
        MetricColumns { packed: Vec::new(), names: NO_NAMES.clone(), spilled: None }
    }
}

fn slot_bytes(cell: Cell) -> [u8; SLOT] {
    let mut bytes = [0u8; SLOT];
    bytes[0] = cell.kind;
    bytes[1..].copy_from_slice(&cell.value.to_ne_bytes());
    bytes
}

const ABSENT_SLOT: Cell = Cell { kind: ABSENT, value: 0.0 };

impl MetricColumns {
    pub fn width(&self) -> usize {
        self.names.len().min(DENSE)
    }

    pub fn len(&self) -> usize {
        self.packed.len() / record_size(self.width())
    }

    /// The index of output `name`, a new one if no score brought it yet: every record widened
    /// by an absent slot while there are fewer than `DENSE` names (`MetricColumns.slot_of`).
    pub fn slot_of(&mut self, name: &str) -> usize {
        if let Some(at) = self.slot(name) {
            return at;
        }
        let at = self.names.len();
        let mut names = Vec::with_capacity(at + 1);
        names.extend(self.names.iter().cloned());
        names.push(name.to_owned());
        self.names = NAMES.shared(&names[..]);
        if at >= DENSE {
            self.spilled.get_or_insert_with(Box::default);
            return at;
        }
        let size = record_size(at);
        let mut widened = Vec::with_capacity(self.packed.len() + self.packed.len() / size.max(1) * SLOT);
        for record in self.packed.chunks_exact(size) {
            widened.extend_from_slice(record);
            widened.extend_from_slice(&slot_bytes(ABSENT_SLOT));
        }
        self.packed = widened;
        at
    }

    /// Room for `rows` records of the present width, made at once where growing would move
    /// them several times (a task's plan: `TaskState::planned`); past them, `snug` growth.
    pub fn reserve_rows(&mut self, rows: usize) {
        let size = rows * record_size(self.width());
        if self.packed.capacity() < size {
            self.packed.reserve_exact(size - self.packed.len());
        }
    }

    /// Add a record; `cells`: (index among `names`, cell) of the outputs it carries, in any
    /// order (none: a failed score). Returns its row.
    pub fn append(&mut self, trial: i32, status: u8, seq: i64, cells: &[(usize, Cell)]) -> usize {
        let width = self.width();
        let row = self.len();
        let mut slots = [ABSENT_SLOT; DENSE];
        let mut sorted: Vec<(usize, Cell)> = cells.to_vec();
        sorted.sort_by_key(|(at, _)| *at);
        for &(at, cell) in &sorted {
            if at < DENSE {
                slots[at] = cell;
            } else {
                let mut spilled = [0u8; SPILLED];
                spilled[0..4].copy_from_slice(&(row as i32).to_ne_bytes());
                spilled[4..8].copy_from_slice(&(at as u32).to_ne_bytes());
                spilled[8] = cell.kind;
                spilled[9..].copy_from_slice(&cell.value.to_ne_bytes());
                snug::extend(self.spilled.get_or_insert_with(Box::default), &spilled);
            }
        }
        let mut record = [0u8; ROW + SLOT * DENSE];
        record[0..4].copy_from_slice(&trial.to_ne_bytes());
        record[4] = status;
        record[5..ROW].copy_from_slice(&seq.to_ne_bytes());
        for (at, slot) in slots[..width].iter().enumerate() {
            record[ROW + at * SLOT..ROW + (at + 1) * SLOT].copy_from_slice(&slot_bytes(*slot));
        }
        snug::extend(&mut self.packed, &record[..record_size(width)]);
        row
    }

    pub fn row(&self, index: usize) -> Row {
        let start = index * record_size(self.width());
        let record = &self.packed[start..start + ROW];
        Row {
            trial: i32::from_ne_bytes(record[0..4].try_into().expect("4 bytes")),
            status: record[4],
            seq: i64::from_ne_bytes(record[5..13].try_into().expect("8 bytes")),
        }
    }

    pub fn rows(&self) -> impl Iterator<Item = Row> + '_ {
        (0..self.len()).map(move |index| self.row(index))
    }

    /// The cell of dense slot `at` of row `index`.
    fn dense(&self, index: usize, at: usize) -> Cell {
        let start = index * record_size(self.width()) + ROW + at * SLOT;
        let slot = &self.packed[start..start + SLOT];
        Cell { kind: slot[0], value: f64::from_ne_bytes(slot[1..].try_into().expect("8 bytes")) }
    }

    /// (row, cell) of the spilled cells, rows ascending.
    fn spilled_cells(&self) -> impl Iterator<Item = (usize, usize, Cell)> + '_ {
        self.spilled.iter().flat_map(|spilled| {
            spilled.chunks_exact(SPILLED).map(|cell| {
                let row = i32::from_ne_bytes(cell[0..4].try_into().expect("4 bytes")) as usize;
                let name = u32::from_ne_bytes(cell[4..8].try_into().expect("4 bytes")) as usize;
                let value = f64::from_ne_bytes(cell[9..17].try_into().expect("8 bytes"));
                (row, name, Cell { kind: cell[8], value })
            })
        })
    }

    /// (row, cell) of the rows that carry output number `at`, rows ascending.
    pub fn cells(&self, at: usize) -> Vec<(usize, Cell)> {
        if at < DENSE {
            return (0..self.len())
                .map(|index| (index, self.dense(index, at)))
                .filter(|(_, cell)| cell.kind != ABSENT)
                .collect();
        }
        self.spilled_cells().filter(|&(_, name, _)| name == at).map(|(row, _, cell)| (row, cell)).collect()
    }

    pub fn slot(&self, output: &str) -> Option<usize> {
        self.names.iter().position(|held| held == output)
    }

    /// (trial index, value, sequence number) of key (this metric, `output`)'s attempts in log
    /// order (SEMANTICS.md section 1): a dead trial adds null, a metric failure nothing, a
    /// completed or partial score its semantic value if it carries one.
    pub fn attempts(&self, output: &str) -> impl Iterator<Item = (i32, Option<f64>, i64)> + '_ {
        let carried = self.carried(output);
        self.rows().enumerate().filter_map(move |(index, row)| match row.status {
            TRIAL_FAILED => Some((row.trial, None, row.seq)),
            OK => carried(index).filter(|cell| cell.semantic()).map(|cell| (row.trial, Some(cell.value), row.seq)),
            _ => None,
        })
    }

    /// Row -> output `output`'s cell in it, if it carries one: read in place from a dense
    /// slot, gathered once from the spilled cells.
    fn carried(&self, output: &str) -> impl Fn(usize) -> Option<Cell> + '_ {
        let at = self.slot(output);
        let spilled: Option<Vec<Option<Cell>>> = at.filter(|&at| at >= DENSE).map(|at| {
            let mut spilled = vec![None; self.len()];
            for (row, cell) in self.cells(at) {
                spilled[row] = Some(cell);
            }
            spilled
        });
        move |index| match (at, &spilled) {
            (None, _) => None,
            (Some(_), Some(spilled)) => spilled[index],
            (Some(at), None) => Some(self.dense(index, at)).filter(|cell| cell.kind != ABSENT),
        }
    }
}

impl MetricColumns {
    /// The rows that are not a completed or partial score (`MetricRecords.failed`).
    pub fn failed(&self) -> usize {
        self.rows().filter(|row| row.status != OK).count()
    }

    /// (run sequence number, value) of the numeric ones of an output's `cells` (its
    /// `cells(at)`), in log order (`MetricRecords.numeric`): booleans and labels are not numeric.
    pub fn numeric<'a>(&'a self, cells: &'a [(usize, Cell)]) -> impl Iterator<Item = (i64, f64)> + 'a {
        cells.iter().filter(|(_, cell)| cell.kind == NUMERIC).map(|&(row, cell)| (self.row(row).seq, cell.value))
    }

    /// Per trial index (of `trials`), output `output`'s semantic value in the trial's last
    /// completed or partial row, if that row carries one (`MetricRecords.semantic_at` read at
    /// `MetricRecords.latest_ok_rows`).
    pub fn latest_semantic(&self, output: &str, trials: usize) -> Vec<Option<f64>> {
        let mut latest = vec![None; trials];
        for (index, row) in self.rows().enumerate().filter(|(_, row)| row.status == OK) {
            latest[row.trial as usize] = Some(index);
        }
        let carried = self.carried(output);
        latest
            .into_iter()
            .map(|row| row.and_then(&carried).filter(|cell| cell.semantic()).map(|cell| cell.value))
            .collect()
    }
}

/// pass@k's full credit: not null and >= 1.0 (NaN never passes).
pub fn passes(value: Option<f64>) -> bool {
    matches!(value, Some(value) if value >= 1.0)
}
