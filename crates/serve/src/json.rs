//! TensorFlow Serving's JSON for tensors: request values (row `instances` and columnar
//! `inputs`) converted to the signature's dtypes and shapes, and output tensors written back
//! (floats with 6 significant digits unless that does not round-trip, `NaN`/`Infinity`, raw
//! strings or `{"b64": ...}` for aliases ending `_bytes`).
use base64::Engine as _;
use ferroflow::tensor::{DType, Tensor};
use ferroflow::train::saved_model::TensorSpec;
use serde_json::Value;

use crate::ApiError;

/// The strings bare `NaN`, `Infinity` and `-Infinity` are read into: a NUL, a per-process
/// random tag and the word, so no string a client sends can pass for one (and strings that
/// start with a NUL stay strings).
fn sentinels() -> &'static [String; 3] {
    static S: std::sync::OnceLock<[String; 3]> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.write_u32(std::process::id());
        let tag = format!("{:016x}", h.finish());
        ["NaN", "Infinity", "-Infinity"].map(|w| format!("\u{0}{tag}:{w}"))
    })
}

/// Parses a request body: JSON plus TensorFlow Serving's bare `NaN`, `Infinity` and
/// `-Infinity` (read into sentinel strings that the float conversion knows).
pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::invalid("JSON Parse error: the body is not UTF-8"))?;
    // Most bodies hold no bare NaN or Infinity: they are parsed as they are, without a copy.
    if !text.contains("NaN") && !text.contains("Infinity") {
        return first_value(text);
    }
    let sentinel = sentinels();
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let replaced = [("NaN", &sentinel[0]), ("Infinity", &sentinel[1]), ("-Infinity", &sentinel[2])]
            .into_iter()
            .find(|(word, _)| rest.starts_with(word));
        if let Some((word, sentinel)) = replaced {
            out.push('"');
            out.push_str(&sentinel.replace('\u{0}', "\\u0000"));
            out.push('"');
            rest = &rest[word.len()..];
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    first_value(&out)
}

/// The first JSON value of `text`; what follows it is ignored, as TensorFlow Serving's reader
/// does.
fn first_value(text: &str) -> Result<Value, ApiError> {
    match serde_json::Deserializer::from_str(text).into_iter::<Value>().next() {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(ApiError::invalid(format!("JSON Parse error: {e}"))),
        None => Err(ApiError::invalid("JSON Parse error: the body is empty")),
    }
}

/// Whether `v` is a string tensor's element written as `{"b64": "..."}`.
fn is_b64(v: &Value) -> bool {
    matches!(v, Value::Object(m) if m.len() == 1 && m.get("b64").is_some_and(Value::is_string))
}

/// The bytes of a `{"b64": "..."}` value (`None` if `v` is not one; an error if the base64
/// does not decode).
pub fn b64_of(v: &Value) -> Option<Result<Vec<u8>, String>> {
    if !is_b64(v) {
        return None;
    }
    let s = v["b64"].as_str().unwrap_or_default();
    Some(base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| format!("bad base64: {e}")))
}

/// The dims of a nested list, checking that it is not ragged; leaves are counted as scalars.
fn dims_of(v: &Value, name: &str) -> Result<Vec<usize>, ApiError> {
    let mut dims = Vec::new();
    let mut cur = v;
    while let Value::Array(a) = cur {
        dims.push(a.len());
        match a.first() {
            Some(first) => cur = first,
            None => break,
        }
    }
    check_shape(v, &dims, name)?;
    Ok(dims)
}

fn check_shape(v: &Value, dims: &[usize], name: &str) -> Result<(), ApiError> {
    match (v, dims.split_first()) {
        (Value::Array(a), Some((&n, rest))) => {
            if a.len() != n {
                return Err(ApiError::invalid(format!(
                    "Expecting tensor size: {n} but got: {} for input '{name}' (the list is ragged)",
                    a.len()
                )));
            }
            a.iter().try_for_each(|x| check_shape(x, rest, name))
        }
        (Value::Array(_), None) => Err(ApiError::invalid(format!("input '{name}': the list is ragged (too deep)"))),
        (_, Some(_)) => {
            Err(ApiError::invalid(format!("input '{name}': the list is ragged (a scalar where a list is)")))
        }
        (_, None) => Ok(()),
    }
}

fn leaves<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| leaves(x, out)),
        other => out.push(other),
    }
}

fn float_of(v: &Value, name: &str) -> Result<f64, ApiError> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| ApiError::invalid(format!("input '{name}': bad number {n}"))),
        Value::String(s) if *s == sentinels()[0] => Ok(f64::NAN),
        Value::String(s) if *s == sentinels()[1] => Ok(f64::INFINITY),
        Value::String(s) if *s == sentinels()[2] => Ok(f64::NEG_INFINITY),
        other => Err(type_error(name, "a number", other)),
    }
}

fn int_of(v: &Value, name: &str, min: i128, max: i128) -> Result<i128, ApiError> {
    let n = match v {
        Value::Number(n) if n.is_i64() => n.as_i64().map(i128::from),
        Value::Number(n) if n.is_u64() => n.as_u64().map(i128::from),
        other => return Err(type_error(name, "an integer", other)),
    };
    n.filter(|n| (min..=max).contains(n))
        .ok_or_else(|| ApiError::invalid(format!("input '{name}': {v} is out of range for its dtype")))
}

fn type_error(name: &str, want: &str, got: &Value) -> ApiError {
    let shown = match got {
        // A bare NaN or Infinity: the word, not its sentinel (a NUL and a tag).
        Value::String(s) if sentinels().contains(s) => s.rsplit(':').next().unwrap_or_default().to_string(),
        other => {
            let t = other.to_string();
            if t.len() > 64 {
                format!("{}...", &t[..t.char_indices().nth(60).map_or(t.len(), |(i, _)| i)])
            } else {
                t
            }
        }
    };
    ApiError::invalid(format!("input '{name}': expected {want}, got {shown}"))
}

/// `v` as a tensor of `spec`'s dtype whose shape must fit `spec`'s.
pub fn to_tensor(v: &Value, spec: &TensorSpec) -> Result<Tensor, ApiError> {
    let name = spec.key.as_str();
    let dims = dims_of(v, name)?;
    if let Some(rank) = spec.shape.rank() {
        if rank != dims.len() {
            return Err(ApiError::invalid(format!(
                "input '{name}': a value of rank {} for a tensor of rank {rank} ({})",
                dims.len(),
                spec.shape.spec(spec.dtype)
            )));
        }
    }
    if !spec.shape.is_compatible_with(&dims) {
        return Err(ApiError::invalid(format!(
            "input '{name}': shape {dims:?} does not fit the signature's {}",
            spec.shape.spec(spec.dtype)
        )));
    }
    let mut items = Vec::new();
    leaves(v, &mut items);
    let err = |e: ferroflow::tensor::TensorError| ApiError::invalid(format!("input '{name}': {e}"));
    macro_rules! ints {
        ($t:ty) => {{
            let data: Vec<$t> = items
                .iter()
                .map(|x| int_of(x, name, <$t>::MIN as i128, <$t>::MAX as i128).map(|n| n as $t))
                .collect::<Result<_, _>>()?;
            Tensor::from_vec(&dims, data).map_err(err)
        }};
    }
    match spec.dtype {
        DType::Float => {
            let data: Vec<f32> = items.iter().map(|x| float_of(x, name).map(|f| f as f32)).collect::<Result<_, _>>()?;
            Tensor::from_vec(&dims, data).map_err(err)
        }
        DType::Double => {
            let data: Vec<f64> = items.iter().map(|x| float_of(x, name)).collect::<Result<_, _>>()?;
            Tensor::from_vec(&dims, data).map_err(err)
        }
        DType::Int8 => ints!(i8),
        DType::Int16 => ints!(i16),
        DType::Int32 => ints!(i32),
        DType::Int64 => ints!(i64),
        DType::UInt8 => ints!(u8),
        DType::UInt16 => ints!(u16),
        DType::UInt32 => ints!(u32),
        DType::UInt64 => ints!(u64),
        DType::Bool => {
            let data: Vec<bool> = items
                .iter()
                .map(|x| match x {
                    Value::Bool(b) => Ok(*b),
                    other => Err(type_error(name, "true or false", other)),
                })
                .collect::<Result<_, _>>()?;
            Tensor::from_vec(&dims, data).map_err(err)
        }
        DType::String => {
            let data: Vec<Vec<u8>> = items
                .iter()
                .map(|x| match x {
                    Value::String(s) if !sentinels().contains(s) => Ok(s.as_bytes().to_vec()),
                    Value::Object(_) if is_b64(x) => b64_of(x)
                        .expect("checked as b64")
                        .map_err(|e| ApiError::invalid(format!("input '{name}': {e}"))),
                    other => Err(type_error(name, "a string or {\"b64\": ...}", other)),
                })
                .collect::<Result<_, _>>()?;
            Tensor::from_strings(&dims, data).map_err(err)
        }
        other => Err(ApiError::invalid(format!("input '{name}': dtype {other:?} is not supported over REST"))),
    }
}

/// The inputs of a predict request as values per signature input, in the signature's order,
/// and whether they came as rows (`instances`: each input's rows stacked into one list). A
/// string element `{"b64": ...}` is a value, not a named row: [`dims_of`] never descends into
/// objects and [`to_tensor`] decodes them.
pub fn request_inputs(body: Value, inputs: &[TensorSpec]) -> Result<(Vec<Value>, bool), ApiError> {
    let Value::Object(mut obj) = body else {
        return Err(ApiError::invalid("JSON Value: is not an object"));
    };
    // As TensorFlow Serving's reader: other top-level keys are ignored.
    // A row names exactly the signature's inputs; the columnar object may name others, which
    // are ignored (both as TensorFlow Serving).
    let by_name = |mut m: serde_json::Map<String, Value>, what: &str| -> Result<Vec<Value>, ApiError> {
        for k in m.keys().filter(|k| !inputs.iter().any(|s| &s.key == *k)) {
            if what != "inputs" {
                return Err(ApiError::invalid(format!(
                    "{what}: '{k}' is not an input of the signature; its inputs: {}",
                    inputs.iter().map(|s| s.key.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
            log::debug!("{what}: '{k}' is not an input of the signature; ignored");
        }
        inputs
            .iter()
            .map(|s| m.remove(&s.key).ok_or_else(|| ApiError::invalid(format!("{what}: input '{}' is missing", s.key))))
            .collect()
    };
    let named = |v: &Value| matches!(v, Value::Object(_)) && !is_b64(v);
    match (obj.remove("instances"), obj.remove("inputs")) {
        (Some(_), Some(_)) => Err(ApiError::invalid("JSON Value: has both 'instances' and 'inputs'; give one")),
        (None, None) => Err(ApiError::invalid("Missing 'inputs' or 'instances' key")),
        (Some(instances), None) => {
            let Value::Array(rows) = instances else {
                return Err(ApiError::invalid("'instances' is not a list"));
            };
            if rows.is_empty() {
                return Err(ApiError::invalid("No instances in the request ('instances' is an empty list)"));
            }
            if rows.iter().any(named) {
                if !rows.iter().all(named) {
                    return Err(ApiError::invalid("instances mix named (object) and bare rows"));
                }
                let mut columns: Vec<Vec<Value>> = vec![Vec::with_capacity(rows.len()); inputs.len()];
                for row in rows {
                    let Value::Object(m) = row else { unreachable!("checked: every row is an object") };
                    for (i, v) in by_name(m, "instances")?.into_iter().enumerate() {
                        columns[i].push(v);
                    }
                }
                Ok((columns.into_iter().map(Value::Array).collect(), true))
            } else if inputs.len() == 1 {
                Ok((vec![Value::Array(rows)], true))
            } else {
                Err(ApiError::invalid(format!(
                    "the signature has {} inputs: each instance must be an object keyed by them",
                    inputs.len()
                )))
            }
        }
        (None, Some(v)) => {
            if named(&v) {
                let Value::Object(m) = v else { unreachable!("checked: named") };
                Ok((by_name(m, "inputs")?, false))
            } else if inputs.len() == 1 {
                Ok((vec![v], false))
            } else {
                Err(ApiError::invalid(format!(
                    "the signature has {} inputs: 'inputs' must be an object keyed by them",
                    inputs.len()
                )))
            }
        }
    }
}

/// A predict body whose one tensor is a nested list of numbers (`{"instances": [[...]]}` or
/// `{"inputs": [[...]]}`, optionally with `"signature_name"`), read straight into `f64`s without
/// a JSON tree: the common request, and most of a request's cost when read through
/// `serde_json::Value`. Anything else (strings, objects, `NaN`, escapes, other keys, odd
/// numbers) is left to [`parse_body`], which also words the errors.
#[derive(Debug)]
pub struct FastRequest {
    /// The `signature_name`, if given.
    pub signature_name: Option<String>,
    /// Whether the tensor came as `instances` (rows) rather than `inputs`.
    pub row: bool,
    /// The nested list's dims.
    pub dims: Vec<usize>,
    /// Its numbers in row-major order.
    pub values: Vec<f64>,
}

struct Fast<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Fast<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\r' | b'\n') {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.s.get(self.i) == Some(&c)).then(|| self.i += 1)
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    /// A string without escapes.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let s: &'a [u8] = self.s;
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i] != b'"' {
            if self.s[self.i] == b'\\' {
                return None;
            }
            self.i += 1;
        }
        let out = std::str::from_utf8(&s[start..self.i]).ok()?;
        self.i += 1;
        Some(out)
    }
    /// A number as JSON writes it (no `+`, no leading `.` or zero, no trailing `.`), read as
    /// the nearest `f64` (as TensorFlow Serving reads it, before any cast to the tensor's dtype).
    fn number(&mut self) -> Option<f64> {
        let s = self.s;
        let mut j = self.i;
        let negative = s.get(j) == Some(&b'-');
        j += usize::from(negative);
        let mut w = 0u64;
        let int_start = j;
        let int_len = match s.get(j) {
            // `0` stands alone (JSON has no leading zeros); most image values start `0.`.
            Some(b'0') if !s.get(j + 1).is_some_and(u8::is_ascii_digit) => {
                j += 1;
                1
            }
            Some(b'1'..=b'9') => digits(s, &mut j, &mut w),
            _ => return None,
        };
        // Digits that went into `w` (a leading `0.` adds none): up to 19 it holds them exactly.
        let mut count = if s[int_start] == b'0' { 0 } else { int_len };
        let mut exp = 0i64;
        if s.get(j) == Some(&b'.') {
            j += 1;
            let fraction = digits(s, &mut j, &mut w);
            if fraction == 0 {
                return None;
            }
            count += fraction;
            exp = -(fraction as i64);
        }
        if s.get(j).is_some_and(|c| c | 0x20 == b'e') {
            j += 1;
            let exp_negative = s.get(j) == Some(&b'-');
            j += usize::from(matches!(s.get(j), Some(b'-' | b'+')));
            let exp_start = j;
            let mut e = 0i64;
            while let Some(d) = s.get(j).filter(|c| c.is_ascii_digit()) {
                e = (e * 10 + i64::from(d - b'0')).min(1 << 32);
                j += 1;
            }
            if j == exp_start {
                return None;
            }
            exp += if exp_negative { -e } else { e };
        }
        self.i = j;
        let exact = if count <= 19 { nearest_f64(w, exp) } else { None };
        let x = match exact {
            Some(x) => x,
            // Long mantissas and large exponents: the standard library's reader.
            None => std::str::from_utf8(&s[int_start..j]).ok()?.parse().ok()?,
        };
        Some(if negative { -x } else { x })
    }
    /// The rank of the nested list that starts here (its leading `[`s), at most 64.
    fn rank(&mut self) -> Option<usize> {
        self.ws();
        let (mut j, mut rank) = (self.i, 0);
        while j < self.s.len() && matches!(self.s[j], b'[' | b' ' | b'\t' | b'\r' | b'\n') {
            rank += usize::from(self.s[j] == b'[');
            j += 1;
        }
        (1..=64).contains(&rank).then_some(rank)
    }
    /// The `,` (false) or `]` (true) after a list's element, consumed.
    fn separator(&mut self) -> Option<bool> {
        // Clients mostly write no space: the next byte is checked before skipping any.
        let c = match self.s.get(self.i) {
            Some(&c @ (b',' | b']')) => c,
            _ => self.peek()?,
        };
        self.i += 1;
        match c {
            b',' => Some(false),
            b']' => Some(true),
            _ => None,
        }
    }
    /// A nested list of numbers at `depth` of `rank`; each level's length equal in every list
    /// (not ragged), recorded in `dims`.
    fn list(&mut self, depth: usize, rank: usize, dims: &mut [Option<usize>], out: &mut Vec<f64>) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            return None;
        }
        let mut n = 0;
        if depth + 1 < rank {
            loop {
                self.list(depth + 1, rank, dims, out)?;
                n += 1;
                if self.separator()? {
                    break;
                }
            }
        } else {
            loop {
                self.ws();
                out.push(self.number()?);
                n += 1;
                if self.separator()? {
                    break;
                }
            }
        }
        match dims[depth] {
            Some(d) if d != n => None,
            _ => {
                dims[depth] = Some(n);
                Some(())
            }
        }
    }
}

/// Eight ASCII digits at `s[j..]` as their number (the bytes of a little-endian word folded
/// in three multiplications), or `None` when they are not all digits.
fn eight_digits(s: &[u8], j: usize) -> Option<u64> {
    let word = u64::from_le_bytes(s.get(j..j + 8)?.try_into().ok()?);
    let v = word.wrapping_sub(0x3030_3030_3030_3030);
    if (word.wrapping_add(0x4646_4646_4646_4646) | v) & 0x8080_8080_8080_8080 != 0 {
        return None;
    }
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    const LOW: u64 = 0x0000_00FF_0000_00FF;
    let a = (v & LOW).wrapping_mul(100 + (1_000_000 << 32));
    let b = ((v >> 16) & LOW).wrapping_mul(1 + (10_000 << 32));
    Some(u64::from(((a.wrapping_add(b)) >> 32) as u32))
}

/// The run of digits at `s[*j..]`, appended to `w` (which wraps past 19 digits: the caller counts
/// them); moves `*j` past them and gives their count.
fn digits(s: &[u8], j: &mut usize, w: &mut u64) -> usize {
    let start = *j;
    while let Some(d) = eight_digits(s, *j) {
        *w = w.wrapping_mul(100_000_000).wrapping_add(d);
        *j += 8;
    }
    while let Some(&c) = s.get(*j).filter(|c| c.is_ascii_digit()) {
        *w = w.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
        *j += 1;
    }
    *j - start
}

/// `w * 10^exp` rounded to the nearest `f64` (ties to even), where that is cheap and exact:
/// `w` up to 2^53 with `|exp|` up to 22 is one correctly rounded IEEE operation on exact
/// operands; longer mantissas (a client's 17-digit `repr` of a float) over `10^1..10^21` are
/// divided exactly in 128 bits. `None` elsewhere.
fn nearest_f64(w: u64, exp: i64) -> Option<f64> {
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
        1e20, 1e21, 1e22,
    ];
    if w <= 1 << 53 && (-22..=22).contains(&exp) {
        let m = w as f64;
        let p = POW10[exp.unsigned_abs() as usize];
        return Some(if exp < 0 { m / p } else { m * p });
    }
    if !(-21..0).contains(&exp) {
        return None;
    }
    // w / 10^k with q's top bit at 2^54..2^56, then rounded to 53 bits on a guard bit and a
    // sticky bit (the remainder and any bits shifted out).
    let p = 10u128.pow(exp.unsigned_abs() as u32);
    let (w_bits, p_bits) = (64 - w.leading_zeros() as i32, 128 - p.leading_zeros() as i32);
    // q gets 56 or 57 bits (more when w is long and k short); w << shift stays under 2^126.
    let shift = (56 + p_bits - w_bits).max(0);
    let n = u128::from(w) << shift;
    let mut q = n / p;
    let mut sticky = n % p != 0;
    let extra = 128 - q.leading_zeros() as i32 - 55;
    if extra > 0 {
        sticky |= q & ((1 << extra) - 1) != 0;
        q >>= extra;
    }
    // The value is q * 2^(extra - shift), with q of 55 bits: 53 kept, a guard bit, one more.
    let mut e = extra - shift + 2;
    let guard = (q >> 1) & 1 != 0;
    sticky |= q & 1 != 0;
    let mut m = (q >> 2) as u64;
    if guard && (sticky || m & 1 != 0) {
        m += 1;
        if m == 1 << 53 {
            m >>= 1;
            e += 1;
        }
    }
    // e is within -130..=0 here (w at least 2^53, k at most 21): a normal power of two.
    Some(m as f64 * f64::from_bits(((1023 + e) as u64) << 52))
}

/// Reads `body` as a [`FastRequest`], or `None` when it is not one.
pub fn parse_fast(body: &[u8]) -> Option<FastRequest> {
    let mut p = Fast { s: body, i: 0 };
    p.eat(b'{')?;
    let (mut signature_name, mut tensor) = (None, None);
    loop {
        let key = p.string()?;
        p.eat(b':')?;
        match key {
            "signature_name" if signature_name.is_none() => signature_name = Some(p.string()?.to_string()),
            "instances" | "inputs" if tensor.is_none() => {
                let rank = p.rank()?;
                // A guess of eight bytes a number ("0.12345,"): a client's floats take 18-20,
                // so the vector rarely regrows, and the reservation stays the body's size.
                let (mut dims, mut values) = (vec![None; rank], Vec::with_capacity((p.s.len() - p.i) / 8));
                p.list(0, rank, &mut dims, &mut values)?;
                let dims: Vec<usize> = dims.into_iter().map(|d| d.unwrap_or(0)).collect();
                tensor = Some((key == "instances", dims, values));
            }
            _ => return None,
        }
        match p.peek()? {
            b',' => p.i += 1,
            b'}' => break,
            _ => return None,
        }
    }
    let (row, dims, values) = tensor?;
    Some(FastRequest { signature_name, row, dims, values })
}

/// The float tensor of a [`FastRequest`] for `spec`, or `None` when the general path should
/// read it (another dtype, or a shape the signature refuses: that path words the error).
pub fn fast_tensor(req: &FastRequest, spec: &TensorSpec) -> Option<Tensor> {
    if spec.shape.rank().is_some_and(|r| r != req.dims.len()) || !spec.shape.is_compatible_with(&req.dims) {
        return None;
    }
    match spec.dtype {
        DType::Float => Tensor::from_vec(&req.dims, req.values.iter().map(|&x| x as f32).collect::<Vec<f32>>()).ok(),
        DType::Double => Tensor::from_vec(&req.dims, req.values.clone()).ok(),
        _ => None,
    }
}

/// `%.*g` of C's printf.
fn format_g(x: f64, precision: usize) -> String {
    let sci = format!("{:.*e}", precision - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= precision as i32 {
        format!("{}e{}{:02}", trim(mantissa), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim(&format!("{x:.decimals$}"))
    }
}

/// A float as TensorFlow Serving writes it: 6 significant digits, or 9 (float32) / 17
/// (float64) when 6 do not read back the same; `.0` when there is no `.` or exponent.
pub fn format_float(x: f64, is_f32: bool) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let round_trips = |s: &str| {
        if is_f32 {
            s.parse::<f32>().ok() == Some(x as f32)
        } else {
            s.parse::<f64>().ok() == Some(x)
        }
    };
    let mut s = format_g(x, 6);
    if !round_trips(&s) {
        s = format_g(x, if is_f32 { 9 } else { 17 });
    }
    if !s.contains(['.', 'e', 'n', 'N', 'I']) {
        s.push_str(".0");
    }
    s
}

fn write_string(out: &mut String, bytes: &[u8], b64: bool) {
    if b64 {
        out.push_str("{\"b64\":");
        out.push_str(&Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)).to_string());
        out.push('}');
    } else {
        out.push_str(&Value::String(String::from_utf8_lossy(bytes).into_owned()).to_string());
    }
}

/// Writes element `i` of `t`.
fn write_element(out: &mut String, t: &Tensor, i: usize, b64: bool) -> Result<(), ApiError> {
    use std::fmt::Write as _;
    let e = |e: ferroflow::tensor::TensorError| ApiError::internal(format!("output: {e}"));
    macro_rules! int {
        ($t:ty) => {{
            let _ = write!(out, "{}", t.as_slice::<$t>().map_err(e)?[i]);
        }};
    }
    match t.dtype() {
        DType::Float => out.push_str(&format_float(f64::from(t.as_slice::<f32>().map_err(e)?[i]), true)),
        DType::Double => out.push_str(&format_float(t.as_slice::<f64>().map_err(e)?[i], false)),
        DType::Int8 => int!(i8),
        DType::Int16 => int!(i16),
        DType::Int32 => int!(i32),
        DType::Int64 => int!(i64),
        DType::UInt8 => int!(u8),
        DType::UInt16 => int!(u16),
        DType::UInt32 => int!(u32),
        DType::UInt64 => int!(u64),
        DType::Bool => out.push_str(if t.as_slice::<bool>().map_err(e)?[i] { "true" } else { "false" }),
        DType::String => write_string(out, &t.as_strings().map_err(e)?[i], b64),
        other => return Err(ApiError::invalid(format!("an output of dtype {other:?} cannot be written as JSON"))),
    }
    Ok(())
}

/// Writes the part of `t` starting at flat element `start` with dims `dims` as nested lists.
fn write_nested(out: &mut String, t: &Tensor, dims: &[usize], start: usize, b64: bool) -> Result<(), ApiError> {
    match dims.split_first() {
        None => write_element(out, t, start, b64),
        Some((&n, rest)) => {
            let stride: usize = rest.iter().product();
            out.push('[');
            for k in 0..n {
                if k > 0 {
                    out.push(',');
                }
                write_nested(out, t, rest, start + k * stride, b64)?;
            }
            out.push(']');
            Ok(())
        }
    }
}

/// Writes the whole tensor.
pub fn write_tensor(out: &mut String, t: &Tensor, alias: &str) -> Result<(), ApiError> {
    write_nested(out, t, t.dims(), 0, alias.ends_with("_bytes"))
}

/// Writes row `r` of `t` (its first dimension).
pub fn write_row(out: &mut String, t: &Tensor, r: usize, alias: &str) -> Result<(), ApiError> {
    let rest = &t.dims()[1..];
    write_nested(out, t, rest, r * rest.iter().product::<usize>(), alias.ends_with("_bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast reader's numbers are the standard library's, bit for bit: short and long
    /// mantissas, exponents, signed zeros, ties, and a client's 17-digit `repr`s.
    #[test]
    fn numbers_read_as_the_nearest_double() {
        let read = |t: &str| {
            let mut p = Fast { s: t.as_bytes(), i: 0 };
            let x = p.number();
            assert_eq!(p.i, t.len(), "{t}");
            x.unwrap_or_else(|| panic!("{t} not read"))
        };
        let mut cases: Vec<String> = [
            "0",
            "-0",
            "-0.0",
            "1",
            "0.1",
            "0.30000000000000004",
            "1e400",
            "-1e400",
            "5e-324",
            "1e-330",
            "1.7976931348623157e308",
            "-12.5E+3",
            "0.00000000000000000000000123",
            "9007199254740993",
            "9007199254740992",
            "9007199254740994.5",
            "1.00000000000000011102230246251565404236316680908203125",
            "0.99999999999999999",
            "0.12345678901234567",
            "9.999999999999999e-5",
            "1234567.8901234567",
            "123456789012345678901234",
            "12345678901234567890.5",
            "1e22",
            "1e23",
            "1e-22",
            "1e-23",
            "2.2250738585072014e-308",
            "0.6369616985321045",
            "1.0000000000000002",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits((x >> 12) | 0x3FF0_0000_0000_0000) - 1.0;
            let f = v as f32;
            cases.extend([
                format!("{v}"),
                format!("{}", f64::from(f)),
                format!("{v:.17}"),
                format!("{:e}", v * 1e-3),
                format!("{:.18e}", -v * 1e5),
                format!("{:.20}", v * 1e-6),
                format!("{:.1}", v * 1e18),
                format!("{:.3}", -v * 1e15),
            ]);
        }
        for t in &cases {
            let want: f64 = t.parse().unwrap();
            assert_eq!(read(t).to_bits(), want.to_bits(), "{t}");
        }
        for bad in ["-", "1.", "1e", "1e+", ".5", "-.5", "01", "--1", "+1"] {
            let mut p = Fast { s: bad.as_bytes(), i: 0 };
            let whole = p.number().is_some() && p.i == bad.len();
            assert!(!whole, "{bad} read as a number");
        }
    }

    #[test]
    fn the_fast_reader_reads_nested_numbers_and_leaves_the_rest() {
        let r = parse_fast(br#"{"signature_name": "s", "instances": [[1, 2.5, -3e2], [4, 5, 6]]}"#).unwrap();
        assert_eq!(r.signature_name.as_deref(), Some("s"));
        assert!(r.row);
        assert_eq!(r.dims, vec![2, 3]);
        assert_eq!(r.values, vec![1.0, 2.5, -300.0, 4.0, 5.0, 6.0]);
        let r = parse_fast(b" { \"inputs\" : [ [ [0.5] ] ] } trailing").unwrap();
        assert!(!r.row);
        assert_eq!(r.dims, vec![1, 1, 1]);
        for body in [
            &br#"{"instances": [[1, 2], [3]]}"#[..],
            br#"{"instances": [[1, 2], 3]}"#,
            br#"{"instances": [1, [2]]}"#,
            br#"{"instances": []}"#,
            br#"{"instances": [NaN]}"#,
            br#"{"instances": ["a"]}"#,
            br#"{"instances": [01]}"#,
            br#"{"instances": [.5]}"#,
            br#"{"instances": [+1]}"#,
            br#"{"instances": [1.]}"#,
            br#"{"instances": [1], "other": 2}"#,
            br#"{"instances": [1], "inputs": [2]}"#,
            br#"{"instances": [{"a": 1}]}"#,
            br#"{"sig\u0041": "x", "instances": [1]}"#,
            br#"{"instances": [1]"#,
            br#"[1]"#,
            b"",
        ] {
            assert!(parse_fast(body).is_none(), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn floats_print_as_tensorflow_serving_does() {
        assert_eq!(format_float(1.0, true), "1.0");
        assert_eq!(format_float(0.5, true), "0.5");
        assert_eq!(format_float(f64::from(0.1f32), true), "0.1");
        assert_eq!(format_float(1e6, true), "1e+06");
        assert_eq!(format_float(123456.0, true), "123456.0");
        assert_eq!(format_float(1234567.0, true), "1234567.0");
        assert_eq!(format_float(f64::from(std::f32::consts::PI), true), "3.14159274");
        assert_eq!(format_float(0.0001, false), "0.0001");
        assert_eq!(format_float(0.00001, false), "1e-05");
        assert_eq!(format_float(-2.5, false), "-2.5");
        assert_eq!(format_float(0.1, false), "0.1");
        assert_eq!(format_float(1.0 / 3.0, false), "0.33333333333333331");
        assert_eq!(format_float(f64::NAN, true), "NaN");
        assert_eq!(format_float(f64::NEG_INFINITY, true), "-Infinity");
    }

    #[test]
    fn nan_and_infinity_are_read_outside_strings_only() {
        let v = parse_body(br#"{"a": [NaN, Infinity, -Infinity, "NaN"]}"#).unwrap();
        let a = v["a"].as_array().unwrap();
        assert_eq!(a[0].as_str(), Some(sentinels()[0].as_str()));
        assert_eq!(a[1].as_str(), Some(sentinels()[1].as_str()));
        assert_eq!(a[2].as_str(), Some(sentinels()[2].as_str()));
        assert_eq!(a[3].as_str(), Some("NaN"));
        assert!(parse_body(b"{\"a\": [1,").is_err());
    }
}
