//! `tojson` as transformers defines it for chat templates.
//!
//! transformers replaces Jinja's HTML-safe `tojson` with `json.dumps(x, ensure_ascii=False,
//! indent=None, separators=None, sort_keys=False)`. Tool schemas and tool-call arguments are
//! rendered through it, so every byte matters: Python's separators (`", "` and `": "`), its float
//! `repr`, its escapes, and insertion-ordered keys. minijinja's own `tojson` differs on all of
//! these, hence this small serializer.
use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error as JinjaError, ErrorKind, Value};

/// Formatting options, with `json.dumps` semantics.
#[derive(Debug, Clone)]
pub(crate) struct DumpOptions {
    pub ensure_ascii: bool,
    /// `None`: single line. `Some(s)`: newline plus `s` repeated per nesting level.
    pub indent: Option<String>,
    pub item_sep: String,
    pub key_sep: String,
    pub sort_keys: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            ensure_ascii: false,
            indent: None,
            item_sep: ", ".into(),
            key_sep: ": ".into(),
            sort_keys: false,
        }
    }
}

/// The `tojson` filter: `x | tojson(ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`, positional arguments in that order.
pub(crate) fn tojson_filter(
    value: &Value,
    args: Rest<Value>,
    kwargs: Kwargs,
) -> Result<String, JinjaError> {
    let arg = |pos: usize, name: &str| -> Result<Option<Value>, JinjaError> {
        match kwargs.get::<Option<Value>>(name)? {
            Some(v) => Ok(Some(v)),
            None => Ok(args.get(pos).cloned()),
        }
    };
    let mut opts = DumpOptions::default();
    if let Some(v) = arg(0, "ensure_ascii")? {
        opts.ensure_ascii = v.is_true();
    }
    let indent = arg(1, "indent")?.filter(|v| !v.is_none() && !v.is_undefined());
    if let Some(v) = &indent {
        opts.indent = Some(match (v.as_i64(), v.as_str()) {
            (Some(n), _) => " ".repeat(usize::try_from(n).unwrap_or(0)),
            (None, Some(s)) => s.to_string(),
            _ => return Err(bad("indent must be an int or a string")),
        });
        opts.item_sep = ",".into();
    }
    if let Some(v) = arg(2, "separators")?.filter(|v| !v.is_none() && !v.is_undefined()) {
        let seps: Vec<String> = v
            .try_iter()?
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("separators must be two strings"))?;
        match seps.as_slice() {
            [item, key] => {
                opts.item_sep = item.clone();
                opts.key_sep = key.clone();
            }
            _ => return Err(bad("separators must be two strings")),
        }
    }
    if let Some(v) = arg(3, "sort_keys")? {
        opts.sort_keys = v.is_true();
    }
    dumps(value, &opts)
}

/// Serialize a template value like Python's `json.dumps`.
pub(crate) fn dumps(value: &Value, opts: &DumpOptions) -> Result<String, JinjaError> {
    let mut out = String::new();
    write_value(&mut out, value, opts, 0)?;
    Ok(out)
}

fn bad(msg: &str) -> JinjaError {
    JinjaError::new(ErrorKind::InvalidOperation, format!("tojson: {msg}"))
}

fn newline(out: &mut String, opts: &DumpOptions, depth: usize) {
    if let Some(ind) = &opts.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn write_value(
    out: &mut String,
    v: &Value,
    opts: &DumpOptions,
    depth: usize,
) -> Result<(), JinjaError> {
    match v.kind() {
        ValueKind::None | ValueKind::Undefined => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, v),
        ValueKind::String => write_str(out, v.as_str().unwrap_or_default(), opts.ensure_ascii),
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if opts.sort_keys {
                keys.sort();
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&opts.item_sep);
                }
                newline(out, opts, depth + 1);
                write_key(out, key, opts)?;
                out.push_str(&opts.key_sep);
                write_value(out, &v.get_item(key)?, opts, depth + 1)?;
            }
            newline(out, opts, depth);
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&opts.item_sep);
                }
                newline(out, opts, depth + 1);
                write_value(out, item, opts, depth + 1)?;
            }
            newline(out, opts, depth);
            out.push(']');
        }
        _ => {
            return Err(bad(&format!(
                "object of kind {} is not JSON serializable",
                v.kind()
            )));
        }
    }
    Ok(())
}

fn write_key(out: &mut String, key: &Value, opts: &DumpOptions) -> Result<(), JinjaError> {
    match key.kind() {
        ValueKind::String => write_str(out, key.as_str().unwrap_or_default(), opts.ensure_ascii),
        ValueKind::Number => {
            let mut s = String::new();
            write_number(&mut s, key);
            write_str(out, &s, opts.ensure_ascii);
        }
        ValueKind::Bool => out.push_str(if key.is_true() {
            "\"true\""
        } else {
            "\"false\""
        }),
        ValueKind::None => out.push_str("\"null\""),
        _ => return Err(bad("keys must be str, int, float, bool or None")),
    }
    Ok(())
}

fn write_number(out: &mut String, v: &Value) {
    if v.is_integer() {
        out.push_str(&v.to_string());
    } else {
        out.push_str(&float_repr(f64::try_from(v.clone()).unwrap_or(f64::NAN)));
    }
}

/// Python's `float.__repr__` (as used by `json.dumps`): shortest round-trip digits, positional
/// notation for decimal exponents in `[-4, 16)`, otherwise `1.5e-07` style.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let mut s = format!("{x}");
        if !s.contains('.') {
            s.push_str(".0");
        }
        s
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(json: &str, opts: &DumpOptions) -> String {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        dumps(&Value::from_serialize(&v), opts).unwrap()
    }

    #[test]
    fn matches_python_defaults() {
        let o = DumpOptions::default();
        assert_eq!(
            dump(r#"{"b": 1, "a": [1.0, 2.5, "é<>&'"], "c": null}"#, &o),
            r#"{"b": 1, "a": [1.0, 2.5, "é<>&'"], "c": null}"#
        );
        assert_eq!(dump(r#"{"x": {}, "y": []}"#, &o), r#"{"x": {}, "y": []}"#);
        assert_eq!(
            dump(r#""tab\tnl\nq\"\u0001""#, &o),
            r#""tab\tnl\nq\"\u0001""#
        );
    }

    #[test]
    fn indent_and_ascii() {
        let o = DumpOptions {
            indent: Some("  ".into()),
            item_sep: ",".into(),
            ..DumpOptions::default()
        };
        assert_eq!(
            dump(r#"{"a": [1, 2], "b": {}}"#, &o),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}"
        );
        let a = DumpOptions {
            ensure_ascii: true,
            ..DumpOptions::default()
        };
        assert_eq!(dump(r#""é😀""#, &a), r#""\u00e9\ud83d\ude00""#);
    }

    #[test]
    fn python_float_repr() {
        for (x, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (-0.0, "-0.0"),
            (123.456, "123.456"),
            (2.5e-5, "2.5e-05"),
        ] {
            assert_eq!(float_repr(x), s);
        }
    }
}
