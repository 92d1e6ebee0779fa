//! `events._native`: the common valid `score.emitted`, `trial.finished` and `run.closed`
//! messages recognised and built in compiled code, by the rules of `events/fastpath.py`, and
//! the valid `run.started`, by the rules of `events.models` (the Python fast path leaves
//! run.started to pydantic).
//!
//! `Recogniser(rules)(raw)` returns the event `events.fastpath.recognise(raw)` returns (for a
//! run.started, the one pydantic's validator returns), or None when it is not certain (then
//! the caller tries the Python fast path, and pydantic after it). `events/compiled.py` hands
//! it what it must agree with (`Rules`). What it adds is only speed: no msgspec shape, no
//! interpreted builder or validator, one pass over the bytes, and the common forms of
//! `occurred_at` read here (`common_epoch_seconds`; every other form goes to
//! `events.timestamps.epoch_seconds`, the rule).
//!
//! Anything it does not know to be valid it leaves alone: a key given twice, an unknown key
//! or another type's, a null where the shape has none, an integer past 64 bits, a float past
//! the finite range, a string that is not UTF-8, a name or id given twice where the models
//! refuse that, a label given twice (which pydantic takes, keeping the last value).
//!
//! The names it reads (a run id, task and trial ids, metric types, output names) come out of
//! a bounded table of the strings made last (`names.rs`), so a name read again is the same
//! Python string.
//!
//! The fold's own compiled loops are not here: they are `projections/native` (`fold-kernels`).

mod allocator;
mod names;

use std::borrow::Cow;

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyList, PySet, PyString, PyType};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A field given in the message, null or not (`Some(None)` is a null): the models tell a
/// field given as null from one left out (`__pydantic_fields_set__`).
fn given<'de, D: Deserializer<'de>, T: Deserialize<'de>>(input: D) -> Result<Option<T>, D::Error> {
    T::deserialize(input).map(Some)
}

type Given<T> = Option<Option<T>>;

/// A JSON string, borrowed from the message unless it holds an escape.
pub struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        struct Visit;

        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Text<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }

        input.deserialize_str(Visit)
    }
}

/// A record, read from a JSON object only: serde's derived readers take a struct's fields
/// given as an array, in order, too (`"usage": [1, 2, 0.5]`), where the models want an object.
pub struct Object<T>(T);

impl<T> std::ops::Deref for Object<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);

        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Object<T>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("an object")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(self, map: M) -> Result<Object<T>, M::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }

        input.deserialize_map(Visit(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message<'a> {
    #[serde(borrow, rename = "type")]
    kind: Text<'a>,
    schema_version: u64,
    #[serde(borrow)]
    event_id: Text<'a>,
    #[serde(borrow)]
    run_id: Text<'a>,
    #[serde(borrow, default, deserialize_with = "given")]
    occurred_at: Given<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    task_id: Given<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    trial_id: Given<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    metric_type: Given<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    status: Given<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    failure: Given<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    outputs: Given<Vec<Object<OutputMessage<'a>>>>,
    #[serde(borrow, default, deserialize_with = "given")]
    error: Given<Object<ErrorMessage<'a>>>,
    #[serde(default, deserialize_with = "given")]
    usage: Given<Object<UsageMessage>>,
    #[serde(borrow, default, deserialize_with = "given")]
    reason: Given<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputMessage<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    value: Box<RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorMessage<'a> {
    #[serde(borrow, rename = "type", default, deserialize_with = "given")]
    kind: Given<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    message: Given<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageMessage {
    #[serde(default, deserialize_with = "given")]
    input_tokens: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "given")]
    output_tokens: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "given")]
    cost_usd: Option<Box<RawValue>>,
}

/// The envelope's fields, as every type's message holds them.
struct Envelope<'m, 'a> {
    schema_version: u64,
    event_id: &'m str,
    run_id: &'m str,
    occurred_at: &'m Given<Text<'a>>,
}

impl<'a> Message<'a> {
    fn envelope(&self) -> Envelope<'_, 'a> {
        Envelope {
            schema_version: self.schema_version,
            event_id: &self.event_id,
            run_id: &self.run_id,
            occurred_at: &self.occurred_at,
        }
    }
}

/// A `run.started`: a shape of its own, since its fields are none of the other types'.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartedMessage<'a> {
    #[serde(borrow, rename = "type")]
    kind: Text<'a>,
    schema_version: u64,
    #[serde(borrow)]
    event_id: Text<'a>,
    #[serde(borrow)]
    run_id: Text<'a>,
    #[serde(borrow, default, deserialize_with = "given")]
    occurred_at: Given<Text<'a>>,
    #[serde(borrow)]
    tasks: Vec<Object<TaskMessage<'a>>>,
    #[serde(default, deserialize_with = "given")]
    attempts_per_task: Option<Box<RawValue>>,
    #[serde(borrow, default, deserialize_with = "given")]
    labels: Option<Labels<'a>>,
    #[serde(borrow, default, deserialize_with = "given")]
    harbor_rules: Given<Text<'a>>,
}

impl<'a> StartedMessage<'a> {
    fn envelope(&self) -> Envelope<'_, 'a> {
        Envelope {
            schema_version: self.schema_version,
            event_id: &self.event_id,
            run_id: &self.run_id,
            occurred_at: &self.occurred_at,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskMessage<'a> {
    #[serde(borrow)]
    task_id: Text<'a>,
    #[serde(borrow, default, deserialize_with = "given")]
    metrics: Given<Vec<Object<MetricMessage<'a>>>>,
    #[serde(borrow, default, deserialize_with = "given")]
    views: Given<Vec<Object<ViewMessage<'a>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricMessage<'a> {
    #[serde(borrow)]
    metric_type: Text<'a>,
    #[serde(borrow)]
    outputs: Vec<Object<OutputSpecMessage<'a>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputSpecMessage<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(borrow)]
    kind: Text<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewMessage<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(borrow)]
    reducer: Text<'a>,
    #[serde(borrow)]
    signals: Vec<Object<SignalMessage<'a>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalMessage<'a> {
    #[serde(borrow)]
    metric: Text<'a>,
    #[serde(borrow)]
    output: Text<'a>,
    #[serde(default, deserialize_with = "given")]
    weight: Option<Box<RawValue>>,
}

/// `labels`, in the message's order. A key given twice is not certain (pydantic keeps the
/// last value at the first key's place): an error here, which leaves the message alone.
struct Labels<'a>(Vec<(Text<'a>, Text<'a>)>);

impl<'de: 'a, 'a> Deserialize<'de> for Labels<'a> {
    fn deserialize<D: Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        struct Visit;

        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Labels<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("an object of strings")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Labels<'de>, M::Error> {
                let mut pairs: Vec<(Text<'de>, Text<'de>)> = Vec::new();
                while let Some(pair) = map.next_entry::<Text<'de>, Text<'de>>()? {
                    pairs.push(pair);
                }
                if !distinct(pairs.iter().map(|(key, _)| &**key)) {
                    return Err(serde::de::Error::custom("a label given twice"));
                }
                Ok(Labels(pairs))
            }
        }

        input.deserialize_map(Visit)
    }
}

/// A JSON scalar as the models take it.
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

/// The scalar `raw` holds; None for a container, an integer past 64 bits (serde_json would
/// read it as a float) or a float past the finite range.
fn scalar(raw: &RawValue) -> Option<Scalar> {
    let text = raw.get().trim();
    match text.as_bytes().first()? {
        b'n' => Some(Scalar::Null),
        b't' => Some(Scalar::Bool(true)),
        b'f' => Some(Scalar::Bool(false)),
        b'"' => serde_json::from_str(text).ok().map(Scalar::Text),
        b'[' | b'{' => None,
        _ if text.bytes().any(|byte| matches!(byte, b'.' | b'e' | b'E')) => {
            let value: f64 = text.parse().ok()?;
            value.is_finite().then_some(Scalar::Float(value))
        }
        _ => text.parse().ok().map(Scalar::Int),
    }
}

/// The float a finite float field takes `raw` as: any finite number, an integer as the float
/// nearest it (as Python's float() does, past 64 bits too: the text read as a float is that
/// float, except `-0`, which is the integer 0 and so 0.0). None for anything else.
fn finite_float(raw: &RawValue) -> Option<f64> {
    let text = raw.get().trim();
    if !text.starts_with(|first: char| first == '-' || first.is_ascii_digit()) {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    let integer = !text.bytes().any(|byte| matches!(byte, b'.' | b'e' | b'E'));
    value.is_finite().then_some(if integer { value + 0.0 } else { value })
}

/// Seconds since the epoch of an RFC 3339 timestamp, for the common forms only:
/// `YYYY-MM-DDTHH:MM:SS`, up to six digits of fraction, `Z` or `+HH:MM`/`-HH:MM`, a moment
/// that exists, within 2^53 microseconds of the epoch (where Python's int-by-int division
/// and this float division agree). None for anything else: `events.timestamps` decides it.
/// What Python's `datetime.fromisoformat(value.upper()).timestamp()` gives, to the bit: the
/// exact microseconds since the epoch, divided by 10^6 once.
pub fn common_epoch_seconds(value: &str) -> Option<f64> {
    let b = value.as_bytes();
    let digits = |from: usize, count: usize| -> Option<i64> {
        let part = b.get(from..from + count)?;
        part.iter().try_fold(0i64, |sum, &byte| byte.is_ascii_digit().then(|| sum * 10 + i64::from(byte - b'0')))
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    let mut at = 19;
    let mut micros = 0;
    if b[at] == b'.' {
        let count = b[at + 1..].iter().take_while(|byte| byte.is_ascii_digit()).count();
        if !(1..=6).contains(&count) {
            return None;
        }
        micros = digits(at + 1, count)? * 10i64.pow(6 - count as u32);
        at += 1 + count;
    }
    let offset = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (digits(at + 1, 2)?, digits(at + 4, 2)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            (hours * 60 + minutes) * 60 * if *sign == b'-' { -1 } else { 1 }
        }
        _ => return None,
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if year < 1 || !(1..=12).contains(&month) || day < 1 || day > month_days[(month - 1) as usize] {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let shifted = if month <= 2 { year - 1 } else { year };
    let era = shifted.div_euclid(400);
    let of_era = shifted - era * 400;
    let of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let of_era_days = of_era * 365 + of_era / 4 - of_era / 100 + of_year;
    let days = era * 146_097 + of_era_days - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset;
    let total = seconds.checked_mul(1_000_000)?.checked_add(micros)?;
    (total.abs() < 1 << 53).then(|| total as f64 / 1e6)
}

/// `common_epoch_seconds` for the tests that hold it to `events.timestamps.epoch_seconds`.
#[pyfunction]
fn epoch_seconds_of(value: &str) -> Option<f64> {
    common_epoch_seconds(value)
}

/// A new set of `given`'s names: a copy of the table, where adding them one by one would hash
/// and place each.
fn given_set<'py>(py: Python<'py>, given: &Py<PyFrozenSet>) -> PyResult<Bound<'py, PySet>> {
    // SAFETY: PySet_New returns a new set or NULL with an exception set.
    unsafe { Ok(Bound::from_owned_ptr_or_err(py, ffi::PySet_New(given.as_ptr()))?.downcast_into_unchecked()) }
}

/// Not certain: leave the message to the Python fast path and pydantic.
struct Unsure;

impl From<PyErr> for Unsure {
    fn from(_: PyErr) -> Self {
        Unsure
    }
}

impl From<std::convert::Infallible> for Unsure {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

type Built<T> = Result<T, Unsure>;

fn sure(condition: bool) -> Built<()> {
    if condition {
        Ok(())
    } else {
        Err(Unsure)
    }
}

/// Whether no text is given twice (`events.models._unique`'s check).
fn distinct<'t>(texts: impl ExactSizeIterator<Item = &'t str>) -> bool {
    let count = texts.len();
    count < 2 || texts.collect::<std::collections::HashSet<_>>().len() == count
}

fn within(text: &str, most: usize) -> bool {
    // Python's len: code points.
    !text.is_empty() && text.chars().count() <= most
}

/// The bounds of `events.models` an event's ids and names must be within.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub event_id_max: usize,
    pub run_id_max: usize,
    pub name_max: usize,
}

/// How a `score.emitted` ends, as its `status` and `failure` say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreStatus {
    Completed,
    Partial,
    /// `failed` with `failure: "trial"`.
    TrialFailed,
    /// `failed` with `failure: "metric"`.
    MetricFailed,
}

/// What a message of one of the three common types holds, read with every check the
/// recogniser makes before it builds the event: what the fold applies without a model
/// (`projections/native`), and what the recogniser builds its models of.
pub struct Read<'m> {
    pub event_id: &'m str,
    pub run_id: &'m str,
    /// `occurred_at`, when given and not null.
    pub occurred_at: Option<&'m str>,
    pub kind: ReadKind<'m>,
}

pub enum ReadKind<'m> {
    Score {
        task_id: &'m str,
        trial_id: &'m str,
        metric_type: &'m str,
        status: ScoreStatus,
        /// Each output's name and value; the non-finite strings stay strings here.
        outputs: Vec<(&'m str, Scalar)>,
    },
    Trial {
        task_id: &'m str,
        trial_id: &'m str,
        completed: bool,
        /// The error's `type`, when an error with a type is given.
        error_type: Option<&'m str>,
    },
    Closed {
        reason: &'static str,
    },
}

/// Whether an envelope is one the models take: schema version 1, ids within their bounds.
fn enveloped(envelope: &Envelope<'_, '_>, limits: &Limits) -> bool {
    envelope.schema_version == 1
        && within(envelope.event_id, limits.event_id_max)
        && within(envelope.run_id, limits.run_id_max)
}

/// A given, non-null name within the bound.
fn named<'m>(field: &'m Given<Text<'_>>, limits: &Limits) -> Option<&'m str> {
    match field {
        Some(Some(text)) if within(text, limits.name_max) => Some(text),
        _ => None,
    }
}

/// The message of a common type, read (`Read`); None where the recogniser is not certain
/// of it: a run.started, a field of another type, a value past what it reads itself.
pub fn read<'m>(message: &'m Message<'_>, limits: &Limits) -> Option<Read<'m>> {
    if !enveloped(&message.envelope(), limits) {
        return None;
    }
    let kind = match &*message.kind {
        "score.emitted" => read_score(message, limits)?,
        "trial.finished" => read_trial(message, limits)?,
        "run.closed" => read_closed(message)?,
        _ => return None,
    };
    let occurred_at = match &message.occurred_at {
        Some(Some(at)) => Some(&**at),
        _ => None,
    };
    Some(Read { event_id: &message.event_id, run_id: &message.run_id, occurred_at, kind })
}

fn read_score<'m>(message: &'m Message<'_>, limits: &Limits) -> Option<ReadKind<'m>> {
    if message.usage.is_some() || message.reason.is_some() {
        return None;
    }
    let (task_id, trial_id) = (named(&message.task_id, limits)?, named(&message.trial_id, limits)?);
    let metric_type = named(&message.metric_type, limits)?;
    let failure = match message.failure.as_ref().and_then(Option::as_deref) {
        None => None,
        Some("trial") => Some(ScoreStatus::TrialFailed),
        Some("metric") => Some(ScoreStatus::MetricFailed),
        Some(_) => return None,
    };
    let outputs: &[Object<OutputMessage<'_>>] = match &message.outputs {
        Some(None) => return None, // outputs is a list, never null
        Some(Some(outputs)) => outputs,
        None => &[],
    };
    let status = match message.status.as_ref().and_then(Option::as_deref) {
        Some("completed") if failure.is_none() => ScoreStatus::Completed,
        Some("partial") if failure.is_none() => ScoreStatus::Partial,
        // A failed score says why, and carries no outputs.
        Some("failed") if outputs.is_empty() => failure?,
        _ => return None,
    };
    if !distinct(outputs.iter().map(|output| &*output.name)) {
        return None;
    }
    let outputs = outputs
        .iter()
        .map(|output| Some((&*output.name, scalar(&output.value)?)).filter(|(name, _)| within(name, limits.name_max)))
        .collect::<Option<Vec<_>>>()?;
    Some(ReadKind::Score { task_id, trial_id, metric_type, status, outputs })
}

fn read_trial<'m>(message: &'m Message<'_>, limits: &Limits) -> Option<ReadKind<'m>> {
    if message.metric_type.is_some()
        || message.failure.is_some()
        || message.outputs.is_some()
        || message.reason.is_some()
    {
        return None;
    }
    let (task_id, trial_id) = (named(&message.task_id, limits)?, named(&message.trial_id, limits)?);
    let completed = match message.status.as_ref().and_then(Option::as_deref) {
        Some("completed") => true,
        Some("failed") => false,
        _ => return None,
    };
    if let Some(Some(usage)) = &message.usage {
        let tokens = |raw: &Option<Box<RawValue>>| match raw.as_deref().map(scalar) {
            None | Some(Some(Scalar::Null)) => true,
            Some(Some(Scalar::Int(tokens))) => tokens >= 0,
            Some(_) => false,
        };
        let cost = match usage.cost_usd.as_deref() {
            None => true,
            Some(raw) if raw.get().trim() == "null" => true,
            Some(raw) => finite_float(raw).is_some_and(|cost| cost >= 0.0),
        };
        if !(tokens(&usage.input_tokens) && tokens(&usage.output_tokens) && cost) {
            return None;
        }
    }
    let error_type = match &message.error {
        Some(Some(error)) => error.kind.as_ref().and_then(Option::as_deref),
        _ => None,
    };
    Some(ReadKind::Trial { task_id, trial_id, completed, error_type })
}

fn read_closed<'m>(message: &'m Message<'_>) -> Option<ReadKind<'m>> {
    let others = [
        message.task_id.is_some(),
        message.trial_id.is_some(),
        message.metric_type.is_some(),
        message.status.is_some(),
        message.failure.is_some(),
        message.outputs.is_some(),
        message.error.is_some(),
        message.usage.is_some(),
    ];
    if others.contains(&true) {
        return None;
    }
    let reason = match &message.reason {
        None => "completed",
        Some(reason) => match reason.as_deref() {
            Some("completed") => "completed",
            Some("cancelled") => "cancelled",
            Some("failed") => "failed",
            _ => return None,
        },
    };
    Some(ReadKind::Closed { reason })
}

/// The message `text` holds, as serde reads it: None where it is not one of the shapes the
/// recogniser reads (a run.started has a shape of its own: `StartedMessage`).
pub fn message(text: &str) -> Option<Message<'_>> {
    serde_json::from_str::<Object<Message<'_>>>(text).ok().map(|Object(message)| message)
}

/// What the recogniser must agree with, handed over by `events/compiled.py` as a dict: the
/// model classes, `events.timestamps`' reading and the attribute an event keeps its moment in
/// (`events.models.MOMENT`), `events.fastpath`'s fields-given sets, the non-finite strings and
/// `events.models`' bounds.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Rules {
    score_measured: Py<PyType>,
    score_failed: Py<PyType>,
    trial_finished: Py<PyType>,
    run_closed: Py<PyType>,
    output: Py<PyType>,
    error_info: Py<PyType>,
    usage: Py<PyType>,
    run_started: Py<PyType>,
    task_spec: Py<PyType>,
    metric_spec: Py<PyType>,
    output_spec: Py<PyType>,
    view_spec: Py<PyType>,
    signal: Py<PyType>,
    epoch_seconds: PyObject,
    moment: Py<PyString>,
    envelope_given: Py<PyFrozenSet>,
    score_given: Py<PyFrozenSet>,
    trial_given: Py<PyFrozenSet>,
    output_given: Py<PyFrozenSet>,
    started_given: Py<PyFrozenSet>,
    task_given: Py<PyFrozenSet>,
    metric_given: Py<PyFrozenSet>,
    output_spec_given: Py<PyFrozenSet>,
    view_given: Py<PyFrozenSet>,
    signal_given: Py<PyFrozenSet>,
    nonfinite: Py<PyDict>,
    event_id_max: usize,
    run_id_max: usize,
    name_max: usize,
}

#[pyclass(frozen, module = "events._native")]
struct Recogniser {
    rules: Rules,
    names: names::Names,
}

impl std::ops::Deref for Recogniser {
    type Target = Rules;

    fn deref(&self) -> &Rules {
        &self.rules
    }
}

#[pymethods]
impl Recogniser {
    #[new]
    fn new(rules: Rules) -> Self {
        Recogniser { rules, names: names::Names::new() }
    }

    /// The event `raw` (bytes or str) holds, or None when not certain.
    fn __call__(&self, py: Python<'_>, raw: &Bound<'_, PyAny>) -> Option<PyObject> {
        self.recognise(py, raw)
    }
}

/// `events.codec.decode` where this module is built: a message of at most `most` units (as
/// Python's `len` counts them) that `recogniser` takes is its event, and any other is handed
/// to `otherwise`, the rest of the Python decode (its size check, the Python fast path,
/// pydantic's validator), whose event or `DecodeError` it returns or raises. The fold calls
/// it once a message: an interpreted decode between them cost ~1.7k instructions a message.
#[pyclass(frozen, module = "events._native")]
struct Decoder {
    recogniser: Py<Recogniser>,
    otherwise: PyObject,
    most: usize,
}

#[pymethods]
impl Decoder {
    #[new]
    fn new(recogniser: Py<Recogniser>, otherwise: PyObject, most: usize) -> Self {
        Decoder { recogniser, otherwise, most }
    }

    fn __call__(&self, py: Python<'_>, raw: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        if raw.len()? <= self.most {
            if let Some(event) = self.recogniser.get().recognise(py, raw) {
                return Ok(event);
            }
        }
        self.otherwise.call1(py, (raw,))
    }
}

/// An event's envelope as `Recogniser::envelope` reads it: its values so far, the fields
/// given, and the moment of its `occurred_at` (None where it has none).
struct Head<'py> {
    values: Bound<'py, PyDict>,
    fields: Bound<'py, PySet>,
    moment: Bound<'py, PyAny>,
}

impl Recogniser {
    fn recognise(&self, py: Python<'_>, raw: &Bound<'_, PyAny>) -> Option<PyObject> {
        // The whole message checked as UTF-8 once: parsed from bytes, serde_json would check
        // each string and key on its own, ~1.5k instructions a message more.
        let text: &str = if let Ok(data) = raw.downcast::<PyBytes>() {
            std::str::from_utf8(data.as_bytes()).ok()?
        } else if let Ok(text) = raw.downcast::<PyString>() {
            text.to_str().ok()? // a lone surrogate is not UTF-8: not certain
        } else {
            return None;
        };
        match message(text) {
            Some(message) => self.build(py, message).ok(),
            // Its fields are none of the other types': a run.started fails that shape.
            None if text.contains("\"run.started\"") => {
                self.started(py, serde_json::from_str::<Object<_>>(text).ok()?.0).ok()
            }
            None => None,
        }
    }

    fn build(&self, py: Python<'_>, message: Message<'_>) -> Built<PyObject> {
        let read = read(&message, &self.limits()).ok_or(Unsure)?;
        match &read.kind {
            ReadKind::Score { .. } => self.score(py, &message, read),
            ReadKind::Trial { .. } => self.trial(py, &message, read),
            ReadKind::Closed { reason } => self.closed(py, &message, reason),
        }
    }

    fn limits(&self) -> Limits {
        Limits { event_id_max: self.event_id_max, run_id_max: self.run_id_max, name_max: self.name_max }
    }

    /// What pydantic's validator builds: the values in field order, the fields given, no
    /// extras, no private attributes (`events.fastpath._new`): the class's own allocation,
    /// as `object.__new__` makes it, and its four slots set past the frozen `__setattr__`.
    fn model(
        &self,
        py: Python<'_>,
        class: &Py<PyType>,
        values: Bound<'_, PyDict>,
        fields: Bound<'_, PySet>,
    ) -> Built<PyObject> {
        let none = py.None();
        let slots = [
            (intern!(py, "__dict__"), values.as_any().as_ptr()),
            (intern!(py, "__pydantic_fields_set__"), fields.as_any().as_ptr()),
            (intern!(py, "__pydantic_extra__"), none.as_ptr()),
            (intern!(py, "__pydantic_private__"), none.as_ptr()),
        ];
        // SAFETY: `class` is a pydantic model class: a heap type whose `tp_alloc` is set, that
        // `object.__new__` would allocate with `tp_alloc(class, 0)` after checks it passes (it
        // is not abstract, and no arguments are given); each pointer is held for the call.
        unsafe {
            let type_object = class.as_ptr().cast::<ffi::PyTypeObject>();
            let allocate = (*type_object).tp_alloc.ok_or(Unsure)?;
            let model = PyObject::from_owned_ptr_or_err(py, allocate(type_object, 0))?;
            for (name, value) in slots {
                if ffi::PyObject_GenericSetAttr(model.as_ptr(), name.as_ptr(), value) != 0 {
                    return Err(PyErr::fetch(py).into());
                }
            }
            Ok(model)
        }
    }

    /// An event of `class` (`model`), carrying the moment its timestamp was read as (a float,
    /// or None where it has no `occurred_at`), as `events.fastpath` keeps it: for the fold.
    fn event(&self, py: Python<'_>, class: &Py<PyType>, head: Head<'_>) -> Built<PyObject> {
        let Head { values, fields, moment } = head;
        let event = self.model(py, class, values, fields)?;
        // SAFETY: both pointers are held for the call; the attribute is the envelope's slot,
        // set past the frozen `__setattr__` as `model` sets the others.
        if unsafe { ffi::PyObject_GenericSetAttr(event.as_ptr(), self.moment.as_ptr(), moment.as_ptr()) } != 0 {
            return Err(PyErr::fetch(py).into());
        }
        Ok(event)
    }

    /// The envelope's values in the models' order up to `type`, in a dict sized for `size`
    /// values, the fields given (`given`, what the kind requires, then what it finds), and
    /// the moment of its `occurred_at`.
    fn envelope<'py>(
        &self,
        py: Python<'py>,
        message: &Envelope<'_, '_>,
        kind: &Bound<'py, PyString>,
        given: &Py<PyFrozenSet>,
        size: isize,
    ) -> Built<Head<'py>> {
        sure(enveloped(message, &self.limits()))?;
        // SAFETY: the call returns a new dict or NULL with an exception set.
        let values = unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::_PyDict_NewPresized(size))?.downcast_into_unchecked::<PyDict>()
        };
        let fields = given_set(py, given)?;
        values.set_item(intern!(py, "schema_version"), 1)?;
        values.set_item(intern!(py, "event_id"), PyString::new(py, message.event_id))?;
        values.set_item(intern!(py, "run_id"), self.names.get(py, message.run_id))?;
        let moment = match message.occurred_at {
            Some(Some(at)) => {
                fields.add(intern!(py, "occurred_at"))?;
                let at_text = PyString::new(py, at);
                let moment = match common_epoch_seconds(at) {
                    Some(seconds) => PyFloat::new(py, seconds).into_any(),
                    None => self.epoch_seconds.bind(py).call1((&at_text,))?, // ValueError: not certain
                };
                values.set_item(intern!(py, "occurred_at"), at_text)?;
                moment
            }
            Some(None) => {
                fields.add(intern!(py, "occurred_at"))?;
                values.set_item(intern!(py, "occurred_at"), py.None())?;
                py.None().into_bound(py)
            }
            None => {
                values.set_item(intern!(py, "occurred_at"), py.None())?;
                py.None().into_bound(py)
            }
        };
        values.set_item(intern!(py, "type"), kind)?;
        Ok(Head { values, fields, moment })
    }

    /// A name (task id, trial id, metric type, output or view name) within `events.models`' bound.
    fn name_of<'py>(&self, py: Python<'py>, text: &str) -> Built<Bound<'py, PyString>> {
        sure(within(text, self.name_max))?;
        Ok(self.names.get(py, text))
    }

    fn score(&self, py: Python<'_>, message: &Message<'_>, read: Read<'_>) -> Built<PyObject> {
        let ReadKind::Score { task_id, trial_id, metric_type, status, outputs } = read.kind else {
            return Err(Unsure);
        };
        let head = self.envelope(py, &message.envelope(), intern!(py, "score.emitted"), &self.score_given, 12)?;
        let (values, fields) = (&head.values, &head.fields);
        values.set_item(intern!(py, "task_id"), self.name_of(py, task_id)?)?;
        values.set_item(intern!(py, "trial_id"), self.name_of(py, trial_id)?)?;
        values.set_item(intern!(py, "metric_type"), self.name_of(py, metric_type)?)?;
        let (status, failure, class) = match status {
            ScoreStatus::Completed => (intern!(py, "completed"), None, &self.score_measured),
            ScoreStatus::Partial => (intern!(py, "partial"), None, &self.score_measured),
            ScoreStatus::TrialFailed => (intern!(py, "failed"), Some(intern!(py, "trial")), &self.score_failed),
            ScoreStatus::MetricFailed => (intern!(py, "failed"), Some(intern!(py, "metric")), &self.score_failed),
        };
        values.set_item(intern!(py, "status"), status)?;
        if message.failure.is_some() {
            fields.add(intern!(py, "failure"))?;
        }
        values.set_item(intern!(py, "failure"), failure)?;
        if message.outputs.is_some() {
            fields.add(intern!(py, "outputs"))?;
        }
        let built = PyList::empty(py);
        for (name, value) in outputs {
            built.append(self.output(py, name, value)?)?;
        }
        values.set_item(intern!(py, "outputs"), built)?;
        let error = self.error(py, &message.error, fields)?;
        values.set_item(intern!(py, "error"), error)?;
        self.event(py, class, head)
    }

    fn output(&self, py: Python<'_>, name: &str, value: Scalar) -> Built<PyObject> {
        let value: PyObject = match value {
            Scalar::Null => py.None(),
            Scalar::Bool(flag) => PyBool::new(py, flag).to_owned().into_any().unbind(),
            Scalar::Int(number) => number.into_pyobject(py)?.into_any().unbind(),
            Scalar::Float(number) => PyFloat::new(py, number).into_any().unbind(),
            Scalar::Text(text) => {
                let text = PyString::new(py, &text);
                match self.nonfinite.bind(py).get_item(&text)? {
                    Some(number) => number.unbind(),
                    None => text.into_any().unbind(),
                }
            }
        };
        let values = PyDict::new(py);
        values.set_item(intern!(py, "name"), self.names.get(py, name))?;
        values.set_item(intern!(py, "value"), value)?;
        self.model(py, &self.output, values, given_set(py, &self.output_given)?)
    }

    /// The `error` value (an `ErrorInfo` for an object, empty or not), noting it given.
    fn error(
        &self,
        py: Python<'_>,
        error: &Given<Object<ErrorMessage<'_>>>,
        given: &Bound<'_, PySet>,
    ) -> Built<PyObject> {
        let Some(error) = error else {
            return Ok(py.None());
        };
        given.add(intern!(py, "error"))?;
        let Some(error) = error else {
            return Ok(py.None());
        };
        let values = PyDict::new(py);
        let fields = PySet::empty(py)?;
        if error.kind.is_some() {
            fields.add(intern!(py, "type"))?;
        }
        if error.message.is_some() {
            fields.add(intern!(py, "message"))?;
        }
        values.set_item(intern!(py, "type"), error.kind.as_ref().and_then(Option::as_deref))?;
        values.set_item(intern!(py, "message"), error.message.as_ref().and_then(Option::as_deref))?;
        self.model(py, &self.error_info, values, fields)
    }

    fn trial(&self, py: Python<'_>, message: &Message<'_>, read: Read<'_>) -> Built<PyObject> {
        let ReadKind::Trial { task_id, trial_id, completed, .. } = read.kind else {
            return Err(Unsure);
        };
        let head = self.envelope(py, &message.envelope(), intern!(py, "trial.finished"), &self.trial_given, 10)?;
        let (values, fields) = (&head.values, &head.fields);
        values.set_item(intern!(py, "task_id"), self.name_of(py, task_id)?)?;
        values.set_item(intern!(py, "trial_id"), self.name_of(py, trial_id)?)?;
        let status = if completed { intern!(py, "completed") } else { intern!(py, "failed") };
        values.set_item(intern!(py, "status"), status)?;
        let error = self.error(py, &message.error, fields)?;
        values.set_item(intern!(py, "error"), error)?;
        let usage = match &message.usage {
            None => py.None(),
            Some(usage) => {
                fields.add(intern!(py, "usage"))?;
                match usage {
                    None => py.None(),
                    Some(usage) => self.usage(py, usage)?,
                }
            }
        };
        values.set_item(intern!(py, "usage"), usage)?;
        self.event(py, &self.trial_finished, head)
    }

    /// A usage `read_trial` checked.
    fn usage(&self, py: Python<'_>, usage: &UsageMessage) -> Built<PyObject> {
        let values = PyDict::new(py);
        let fields = PySet::empty(py)?;
        for (name, raw) in
            [(intern!(py, "input_tokens"), &usage.input_tokens), (intern!(py, "output_tokens"), &usage.output_tokens)]
        {
            let value: PyObject = match raw.as_deref().map(scalar) {
                Some(Some(Scalar::Int(tokens))) => tokens.into_pyobject(py)?.into_any().unbind(),
                _ => py.None(),
            };
            if raw.is_some() {
                fields.add(name)?;
            }
            values.set_item(name, value)?;
        }
        let cost: PyObject = match usage.cost_usd.as_deref().and_then(finite_float) {
            Some(cost) => PyFloat::new(py, cost).into_any().unbind(),
            None => py.None(),
        };
        if usage.cost_usd.is_some() {
            fields.add(intern!(py, "cost_usd"))?;
        }
        values.set_item(intern!(py, "cost_usd"), cost)?;
        self.model(py, &self.usage, values, fields)
    }

    fn started(&self, py: Python<'_>, message: StartedMessage<'_>) -> Built<PyObject> {
        sure(&*message.kind == "run.started")?;
        sure(distinct(message.tasks.iter().map(|task| &*task.task_id)))?;
        let head = self.envelope(py, &message.envelope(), intern!(py, "run.started"), &self.started_given, 9)?;
        let (values, fields) = (&head.values, &head.fields);
        let tasks = PyList::empty(py);
        for task in &message.tasks {
            tasks.append(self.task(py, task)?)?;
        }
        values.set_item(intern!(py, "tasks"), tasks)?;
        let attempts: PyObject = match message.attempts_per_task.as_deref().map(scalar) {
            None | Some(Some(Scalar::Null)) => py.None(),
            Some(Some(Scalar::Int(count))) if (1..=1_000_000).contains(&count) => {
                count.into_pyobject(py)?.into_any().unbind()
            }
            Some(_) => return Err(Unsure),
        };
        if message.attempts_per_task.is_some() {
            fields.add(intern!(py, "attempts_per_task"))?;
        }
        values.set_item(intern!(py, "attempts_per_task"), attempts)?;
        let labels = PyDict::new(py);
        if let Some(given) = &message.labels {
            fields.add(intern!(py, "labels"))?;
            for (key, value) in &given.0 {
                labels.set_item(PyString::new(py, key), PyString::new(py, value))?;
            }
        }
        values.set_item(intern!(py, "labels"), labels)?;
        // One of `events.models.HarborRules`' literals, or null; anything else is pydantic's to refuse.
        let rules: PyObject = match &message.harbor_rules {
            None | Some(None) => py.None(),
            Some(Some(text)) if matches!(&**text, "0.26" | "0.25") => PyString::new(py, text).into_any().unbind(),
            Some(Some(_)) => return Err(Unsure),
        };
        if message.harbor_rules.is_some() {
            fields.add(intern!(py, "harbor_rules"))?;
        }
        values.set_item(intern!(py, "harbor_rules"), rules)?;
        self.event(py, &self.run_started, head)
    }

    fn task(&self, py: Python<'_>, task: &TaskMessage<'_>) -> Built<PyObject> {
        // Made anew, not through the names table. The table would keep each of a big
        // run.started's task ids, made among the message's transient models, and they
        // kept Python's heap at the size of that decoding once the models were freed
        // (~20 MB for 3,000 tasks, where the native fold keeps none of them).
        sure(within(&task.task_id, self.name_max))?;
        let task_id = PyString::new(py, &task.task_id);
        let fields = given_set(py, &self.task_given)?;
        let metrics = PyList::empty(py);
        if let Some(given) = &task.metrics {
            let given = given.as_ref().ok_or(Unsure)?; // a list, never null
            fields.add(intern!(py, "metrics"))?;
            sure(distinct(given.iter().map(|metric| &*metric.metric_type)))?;
            for metric in given {
                metrics.append(self.metric(py, metric)?)?;
            }
        }
        let views = PyList::empty(py);
        if let Some(given) = &task.views {
            let given = given.as_ref().ok_or(Unsure)?; // a list, never null
            fields.add(intern!(py, "views"))?;
            sure(distinct(given.iter().map(|view| &*view.name)))?;
            for view in given {
                views.append(self.view(py, view)?)?;
            }
        }
        let values = PyDict::new(py);
        values.set_item(intern!(py, "task_id"), task_id)?;
        values.set_item(intern!(py, "metrics"), metrics)?;
        values.set_item(intern!(py, "views"), views)?;
        self.model(py, &self.task_spec, values, fields)
    }

    fn metric(&self, py: Python<'_>, metric: &MetricMessage<'_>) -> Built<PyObject> {
        let metric_type = self.name_of(py, &metric.metric_type)?;
        sure(distinct(metric.outputs.iter().map(|output| &*output.name)))?;
        let outputs = PyList::empty(py);
        for output in &metric.outputs {
            let name = self.name_of(py, &output.name)?;
            let kind = match &*output.kind {
                "continuous" => intern!(py, "continuous"),
                "discrete" => intern!(py, "discrete"),
                "boolean" => intern!(py, "boolean"),
                "label" => intern!(py, "label"),
                "model" => intern!(py, "model"),
                _ => return Err(Unsure),
            };
            let values = PyDict::new(py);
            values.set_item(intern!(py, "name"), name)?;
            values.set_item(intern!(py, "kind"), kind)?;
            outputs.append(self.model(py, &self.output_spec, values, given_set(py, &self.output_spec_given)?)?)?;
        }
        let values = PyDict::new(py);
        values.set_item(intern!(py, "metric_type"), metric_type)?;
        values.set_item(intern!(py, "outputs"), outputs)?;
        self.model(py, &self.metric_spec, values, given_set(py, &self.metric_given)?)
    }

    fn view(&self, py: Python<'_>, view: &ViewMessage<'_>) -> Built<PyObject> {
        let name = self.name_of(py, &view.name)?;
        let reducer = match &*view.reducer {
            "single" => intern!(py, "single"),
            "all" => intern!(py, "all"),
            "any" => intern!(py, "any"),
            "mean" => intern!(py, "mean"),
            "weighted" => intern!(py, "weighted"),
            _ => return Err(Unsure),
        };
        let signals = PyList::empty(py);
        for signal in &view.signals {
            let (metric, output) = (self.name_of(py, &signal.metric)?, self.name_of(py, &signal.output)?);
            let fields = given_set(py, &self.signal_given)?;
            let weight = match &signal.weight {
                None => 1.0,
                Some(raw) => {
                    fields.add(intern!(py, "weight"))?;
                    finite_float(raw).ok_or(Unsure)?
                }
            };
            let values = PyDict::new(py);
            values.set_item(intern!(py, "metric"), metric)?;
            values.set_item(intern!(py, "output"), output)?;
            values.set_item(intern!(py, "weight"), PyFloat::new(py, weight))?;
            signals.append(self.model(py, &self.signal, values, fields)?)?;
        }
        let values = PyDict::new(py);
        values.set_item(intern!(py, "name"), name)?;
        values.set_item(intern!(py, "reducer"), reducer)?;
        values.set_item(intern!(py, "signals"), signals)?;
        self.model(py, &self.view_spec, values, given_set(py, &self.view_given)?)
    }

    fn closed(&self, py: Python<'_>, message: &Message<'_>, reason: &str) -> Built<PyObject> {
        let head = self.envelope(py, &message.envelope(), intern!(py, "run.closed"), &self.envelope_given, 6)?;
        if message.reason.is_some() {
            head.fields.add(intern!(py, "reason"))?;
        }
        head.values.set_item(intern!(py, "reason"), PyString::intern(py, reason))?;
        self.event(py, &self.run_closed, head)
    }
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Recogniser>()?;
    module.add_class::<Decoder>()?;
    module.add_function(wrap_pyfunction!(epoch_seconds_of, module)?)
}
