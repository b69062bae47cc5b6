//! Jobs in, results out: the JSON-lines formats of `warpvisor run --jobs/--output`, and the
//! text form of arguments given on the command line.
//!
//! Integers are JSON integers (i64 in full), floats JSON numbers with `-0.0` kept; NaN and the
//! infinities are the strings `"nan"`, `"inf"`, `"-inf"`, or `"nan:0x..."` for a NaN whose
//! payload is not the canonical one.

use serde::Deserialize;
use wasmparser::ValType;

use crate::vmm::{Outcome, Value};

/// Why a job or argument could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

/// What kind of JSON value `v` is, with its article: "an array", "null", ...
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Reads a job line as `T`, a struct with `#[serde(deny_unknown_fields)]`: the line must be
/// one JSON object whose keys are `T`'s fields, each at most once.
pub fn parse_object<T: serde::de::DeserializeOwned>(line: &str) -> Result<T, JobError> {
    if !line.trim_start().starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| JobError(format!("not JSON: {e}")))?;
        return Err(JobError(format!(
            "expected a JSON object, found {}",
            json_kind(&v)
        )));
    }
    serde_json::from_str(line).map_err(|e| {
        // serde speaks of fields; a JSON line has keys. The position matters only for syntax.
        let msg = e.to_string();
        let at = format!(" at line {} column {}", e.line(), e.column());
        let short = msg.strip_suffix(&at).unwrap_or(&msg);
        JobError(
            match (
                short.strip_prefix("unknown field "),
                short.strip_prefix("duplicate field "),
            ) {
                (Some(rest), _) => format!("unknown key {rest}"),
                (_, Some(rest)) => format!("duplicate key {rest}"),
                _ if e.is_syntax() || e.is_eof() => format!("not JSON: {msg}"),
                _ => short.to_string(),
            },
        )
    })
}

/// Deserializes a present key as `Some`, `null` included (a bare `Option` makes `null` `None`),
/// so that `"args": null` is reported as not an array.
pub fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

/// A job line of `--invoke`: `{"args": [...]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InvokeJob {
    #[serde(default, deserialize_with = "present")]
    args: Option<serde_json::Value>,
}

fn parse_f64_text(s: &str) -> Option<(bool, f64, Option<u64>)> {
    // (negative, value, explicit NaN payload)
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    match body {
        "nan" => Some((neg, f64::NAN, None)),
        "inf" | "infinity" => Some((neg, f64::INFINITY, None)),
        _ => {
            if let Some(hex) = body.strip_prefix("nan:0x") {
                let payload = u64::from_str_radix(hex, 16).ok()?;
                return Some((neg, f64::NAN, Some(payload)));
            }
            let v: f64 = body.parse().ok()?;
            Some((neg, v, None))
        }
    }
}

fn float_value(ty: ValType, neg: bool, v: f64, payload: Option<u64>) -> Option<Value> {
    match ty {
        ValType::F32 => {
            let bits = match payload {
                Some(p) if p == 0 || p > 0x7f_ffff => return None,
                Some(p) => 0x7f80_0000 | p as u32,
                None if v.is_nan() => 0x7fc0_0000,
                None => (v as f32).to_bits(),
            };
            Some(Value::F32(if neg { bits ^ 0x8000_0000 } else { bits }))
        }
        ValType::F64 => {
            let bits = match payload {
                Some(p) if p == 0 || p > 0xf_ffff_ffff_ffff => return None,
                Some(p) => 0x7ff0_0000_0000_0000 | p,
                None if v.is_nan() => 0x7ff8_0000_0000_0000,
                None => v.to_bits(),
            };
            Some(Value::F64(if neg { bits ^ (1 << 63) } else { bits }))
        }
        _ => None,
    }
}

/// Parses a command-line argument as a value of type `ty`.
pub fn parse_arg(text: &str, ty: ValType) -> Result<Value, JobError> {
    let bad = || JobError(format!("`{text}` is not a valid {ty} argument"));
    match ty {
        ValType::I32 => {
            if let Ok(v) = text.parse::<i32>() {
                Ok(Value::I32(v))
            } else {
                text.parse::<u32>()
                    .map(|v| Value::I32(v as i32))
                    .map_err(|_| bad())
            }
        }
        ValType::I64 => {
            if let Ok(v) = text.parse::<i64>() {
                Ok(Value::I64(v))
            } else {
                text.parse::<u64>()
                    .map(|v| Value::I64(v as i64))
                    .map_err(|_| bad())
            }
        }
        ValType::F32 | ValType::F64 => {
            let (neg, v, p) = parse_f64_text(text).ok_or_else(bad)?;
            float_value(ty, neg, v, p).ok_or_else(bad)
        }
        ValType::Ref(r) => {
            if text == "null" {
                Ok(Value::zero(ty))
            } else if r.is_extern_ref() {
                text.parse::<u32>()
                    .map(|n| Value::ExternRef(Some(n)))
                    .map_err(|_| bad())
            } else {
                Err(bad())
            }
        }
        _ => Err(bad()),
    }
}

/// Converts a JSON argument to a value of type `ty`.
pub fn json_arg(v: &serde_json::Value, ty: ValType) -> Result<Value, JobError> {
    let bad = || JobError(format!("{v} is not a valid {ty} argument"));
    match (v, ty) {
        (serde_json::Value::String(s), _) => parse_arg(s, ty),
        (serde_json::Value::Null, ValType::Ref(_)) => Ok(Value::zero(ty)),
        (serde_json::Value::Number(n), ValType::I32 | ValType::I64 | ValType::Ref(_)) => {
            if n.is_f64() {
                return Err(bad());
            }
            parse_arg(&n.to_string(), ty)
        }
        (serde_json::Value::Number(n), ValType::F32 | ValType::F64) => {
            let f = n.as_f64().ok_or_else(bad)?;
            float_value(ty, false, f, None).ok_or_else(bad)
        }
        _ => Err(bad()),
    }
}

/// Reads one job line `{"args": [...]}` for a function taking `params` (`{}` for none).
pub fn parse_job(line: &str, params: &[ValType]) -> Result<Vec<Value>, JobError> {
    let job: InvokeJob = parse_object(line)?;
    let args = match &job.args {
        None => &Vec::new(),
        Some(serde_json::Value::Array(a)) => a,
        Some(v) => {
            return Err(JobError(format!(
                "\"args\" must be an array, not {}",
                json_kind(v)
            )))
        }
    };
    if args.len() != params.len() {
        return Err(JobError(format!(
            "{} arguments given, the function takes {}",
            args.len(),
            params.len()
        )));
    }
    args.iter()
        .zip(params)
        .map(|(a, t)| json_arg(a, *t))
        .collect()
}

fn float_json(
    is_nan: bool,
    canonical: bool,
    payload_hex: String,
    debug: String,
    negative: bool,
    infinite: bool,
) -> String {
    if is_nan {
        let sign = if negative { "-" } else { "" };
        if canonical {
            format!("\"{sign}nan\"")
        } else {
            format!("\"{sign}nan:0x{payload_hex}\"")
        }
    } else if infinite {
        if negative {
            "\"-inf\"".into()
        } else {
            "\"inf\"".into()
        }
    } else {
        debug
    }
}

/// A value as JSON text.
pub fn value_json(v: &Value) -> String {
    match *v {
        Value::I32(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F32(b) => {
            let f = f32::from_bits(b);
            float_json(
                f.is_nan(),
                b & 0x7f_ffff == 0x40_0000,
                format!("{:x}", b & 0x7f_ffff),
                format!("{f:?}"),
                b >> 31 == 1,
                f.is_infinite(),
            )
        }
        Value::F64(b) => {
            let f = f64::from_bits(b);
            float_json(
                f.is_nan(),
                b & 0xf_ffff_ffff_ffff == 0x8_0000_0000_0000,
                format!("{:x}", b & 0xf_ffff_ffff_ffff),
                format!("{f:?}"),
                b >> 63 == 1,
                f.is_infinite(),
            )
        }
        Value::FuncRef(r) | Value::ExternRef(r) => r.map_or("null".into(), |x| x.to_string()),
    }
}

/// The result line of job `job`.
pub fn result_line(job: usize, outcome: &Outcome) -> String {
    match outcome {
        Outcome::Returned(values) => {
            let vs: Vec<String> = values.iter().map(value_json).collect();
            format!("{{\"job\": {job}, \"results\": [{}]}}", vs.join(", "))
        }
        Outcome::Trapped(kind) => format!("{{\"job\": {job}, \"trap\": \"{kind}\"}}"),
        Outcome::Exited(code) => format!("{{\"job\": {job}, \"exit_code\": {code}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_trip_with_signs_and_nans() {
        let v = parse_arg("-0.0", ValType::F64).unwrap();
        assert_eq!(value_json(&v), "-0.0");
        assert_eq!(
            value_json(&parse_arg("nan", ValType::F32).unwrap()),
            "\"nan\""
        );
        assert_eq!(
            value_json(&parse_arg("-inf", ValType::F64).unwrap()),
            "\"-inf\""
        );
        assert_eq!(
            value_json(&parse_arg("nan:0x1", ValType::F32).unwrap()),
            "\"nan:0x1\""
        );
        assert_eq!(value_json(&parse_arg("2.5", ValType::F32).unwrap()), "2.5");
    }

    #[test]
    fn integers_keep_full_range() {
        let job = parse_job(
            r#"{"args": [-2, 9223372036854775807, "nan"]}"#,
            &[ValType::I32, ValType::I64, ValType::F64],
        )
        .unwrap();
        assert_eq!(job[0], Value::I32(-2));
        assert_eq!(value_json(&job[1]), "9223372036854775807");
        assert!(parse_job(r#"{"args": [1.5]}"#, &[ValType::I32]).is_err());
        assert!(parse_job(r#"{"args": []}"#, &[ValType::I32]).is_err());
    }

    #[test]
    fn job_lines_must_be_objects_with_known_keys() {
        let err = |line: &str| parse_job(line, &[]).unwrap_err().to_string();
        assert_eq!(parse_job("{}", &[]).unwrap(), vec![]);
        assert_eq!(parse_job(r#"{"args": []}"#, &[]).unwrap(), vec![]);
        assert_eq!(err("[1, 2]"), "expected a JSON object, found an array");
        assert_eq!(err("42"), "expected a JSON object, found a number");
        assert_eq!(err("null"), "expected a JSON object, found null");
        assert_eq!(err(r#""args""#), "expected a JSON object, found a string");
        assert_eq!(err(r#"{"arg": []}"#), "unknown key `arg`, expected `args`");
        assert_eq!(
            err(r#"{"args": [], "env": {}}"#),
            "unknown key `env`, expected `args`"
        );
        assert_eq!(err(r#"{"args": [], "args": []}"#), "duplicate key `args`");
        assert_eq!(
            err(r#"{"args": 3}"#),
            "\"args\" must be an array, not a number"
        );
        assert_eq!(
            err(r#"{"args": null}"#),
            "\"args\" must be an array, not null"
        );
        assert_eq!(
            err(r#"{"fields": []}"#),
            "unknown key `fields`, expected `args`"
        );
        assert!(err("{").starts_with("not JSON"));
    }
}
