//! A finite double as JSON text, byte for byte as orjson writes it: orjson formats a finite
//! float with the `zmij` crate's `Buffer::format_finite` (shortest round-trip digits, ".0"
//! on an integer's, an exponent past 16 digits or below 1e-5 as "1e+16", "1e-7"), and so does
//! this. `projections.kernels.encode_float_in_python`, orjson itself, is the twin.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The JSON text of the finite `value`, appended to `out`.
pub fn write_float(out: &mut Vec<u8>, value: f64) {
    debug_assert!(value.is_finite(), "JSON has no text for {value}");
    out.extend_from_slice(zmij::Buffer::new().format_finite(value).as_bytes());
}

/// `orjson.dumps(value)` of a finite float; a ValueError for NaN and the infinities, which
/// have no JSON text (orjson writes them as null).
#[pyfunction]
pub fn encode_float(py: Python<'_>, value: f64) -> PyResult<Bound<'_, PyBytes>> {
    if !value.is_finite() {
        return Err(PyValueError::new_err(format!("{value} is not a finite float: JSON has no text for it")));
    }
    let mut out = Vec::with_capacity(24);
    write_float(&mut out, value);
    Ok(PyBytes::new(py, &out))
}

/// Python's `repr` of a float (Harbor's reward_stats keys, SEMANTICS.md section 6): the same
/// shortest round-trip digits as orjson's text (read back from it), laid out as CPython's
/// `float_repr` does: positional from 1e-4 up to 1e16 (excluded), with ".0" on an integer's
/// digits, else "d.ddde+XX" (two exponent digits at least); "nan", "inf", "-inf". Appended to
/// `out`.
pub fn write_repr(out: &mut Vec<u8>, value: f64) {
    if value.is_nan() {
        return out.extend_from_slice(b"nan");
    }
    if value.is_infinite() {
        return out.extend_from_slice(if value > 0.0 { b"inf" } else { b"-inf" });
    }
    let start = out.len();
    write_float(out, value);
    // Positional text in repr's positional range is repr's text already ("1.0", "0.25"):
    // the usual reward, which the layout below would take apart and put back together.
    if !out[start..].iter().any(|&byte| byte == b'e' || byte == b'E') && (value == 0.0 || value.abs() >= 1e-4) {
        return;
    }
    let text = String::from_utf8(out.split_off(start)).expect("a float's text is ASCII");
    let body = text.trim_start_matches('-');
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().expect("an exponent")),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{whole}{fraction}");
    let leading = all.bytes().take_while(|&digit| digit == b'0').count();
    // The digits d1 d2 ... and the point's place: the value is 0.d1d2... x 10^point.
    let (digits, point) = if leading == all.len() {
        ("0", 1)
    } else {
        (all[leading..].trim_end_matches('0'), whole.len() as i64 - leading as i64 + exponent)
    };
    let count = digits.len() as i64;
    let mut repr = String::with_capacity(24);
    if text.starts_with('-') {
        repr.push('-');
    }
    if point <= -4 || point > 16 {
        repr.push_str(&digits[..1]);
        if count > 1 {
            repr.push('.');
            repr.push_str(&digits[1..]);
        }
        let exponent = point - 1;
        repr.push_str(&format!("e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs()));
    } else if point <= 0 {
        repr.push_str("0.");
        repr.push_str(&"0".repeat((-point) as usize));
        repr.push_str(digits);
    } else if point >= count {
        repr.push_str(digits);
        repr.push_str(&"0".repeat((point - count) as usize));
        repr.push_str(".0");
    } else {
        repr.push_str(&digits[..point as usize]);
        repr.push('.');
        repr.push_str(&digits[point as usize..]);
    }
    out.extend_from_slice(repr.as_bytes());
}

/// `write_repr`'s text as a string.
pub fn python_repr(value: f64) -> String {
    let mut text = Vec::with_capacity(24);
    write_repr(&mut text, value);
    String::from_utf8(text).expect("a float's repr is ASCII")
}

/// `repr(value)`, for the tests that hold `python_repr` to Python's.
#[pyfunction]
#[pyo3(name = "float_repr")]
pub fn float_repr_of(value: f64) -> String {
    python_repr(value)
}
