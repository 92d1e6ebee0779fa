//! JSON text as orjson writes it (`orjson.dumps` with no option, what the Python fold's
//! summaries are): no whitespace, strings as UTF-8 with `"`, `\` and the control characters
//! escaped (`\b`, `\t`, `\n`, `\f`, `\r` short, the others `\u00XX` in lowercase hex; DEL and
//! every non-ASCII character kept as they are), floats by `floats::write_float`, integers
//! plain. A float orjson is given raw is written as null when it is not finite; a number the
//! contract says may be non-finite is written as its EVENTS.md string (`wire`).

use crate::floats::write_float;

/// A member name known when compiled, as `Items::known` takes it: `"name":` (a name with no
/// character to escape).
macro_rules! known {
    ($name:literal) => {
        concat!("\"", $name, "\":")
    };
}
pub(crate) use known;

/// A JSON object or array being written: the separator before each item but the first.
pub struct Items<'a> {
    out: &'a mut Vec<u8>,
    close: u8,
    first: bool,
}

impl<'a> Items<'a> {
    pub fn object(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Items { out, close: b'}', first: true }
    }

    pub fn array(out: &'a mut Vec<u8>) -> Self {
        out.push(b'[');
        Items { out, close: b']', first: true }
    }

    /// The buffer, at the place of the next array item (its comma written).
    pub fn item(&mut self) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out
    }

    /// The buffer, at the place of the value of a member whose name is known when compiled:
    /// `quoted` is the name as `known!` spells it, quoted with its colon.
    pub fn known(&mut self, quoted: &'static str) -> &mut Vec<u8> {
        let out = self.item();
        out.extend_from_slice(quoted.as_bytes());
        out
    }

    /// The buffer, at the place of the value of member `name` (its name written).
    pub fn key(&mut self, name: &str) -> &mut Vec<u8> {
        let out = self.item();
        string(out, name);
        out.push(b':');
        out
    }

    pub fn end(self) {
        self.out.push(self.close);
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether `byte` is written as an escape in a JSON string.
fn escaped(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// `value` as a JSON string.
pub fn string(out: &mut Vec<u8>, value: &str) {
    out.push(b'"');
    let bytes = value.as_bytes();
    // Ids and names seldom hold a character to escape: those go in one copy.
    if !bytes.iter().any(|&byte| escaped(byte)) {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0c => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1f => &[b'\\', b'u', b'0', b'0', HEX[(byte >> 4) as usize], HEX[(byte & 0xf) as usize]],
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..at]);
        out.extend_from_slice(escape);
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

pub fn integer(out: &mut Vec<u8>, value: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

pub fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(b"null");
}

/// A float as orjson writes a Python float: its text when finite, else null.
pub fn float(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        write_float(out, value);
    } else {
        null(out);
    }
}

/// A float as the contract writes a number that may be non-finite (`events.nonfinite.wire_float`):
/// its text when finite, else "NaN", "Infinity" or "-Infinity".
pub fn wire(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        write_float(out, value);
    } else if value.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if value > 0.0 {
        out.extend_from_slice(b"\"Infinity\"");
    } else {
        out.extend_from_slice(b"\"-Infinity\"");
    }
}

/// `wire` of a number that may be absent (null).
pub fn optional_wire(out: &mut Vec<u8>, value: Option<f64>) {
    match value {
        Some(value) => wire(out, value),
        None => null(out),
    }
}

/// `float` of a number that may be absent (null).
pub fn optional_float(out: &mut Vec<u8>, value: Option<f64>) {
    match value {
        Some(value) => float(out, value),
        None => null(out),
    }
}
