//! The non-finite tokens of KServe v2 JSON tensor data: `NaN`, `Infinity` and `-Infinity` (what Python's `json`
//! and so `tritonclient[http]` with `binary_data=False` write, and what Triton accepts) are taken as elements of
//! `inputs[*].data` only. serde_json reads none of them, so [`rewrite`] walks the request once, without
//! recursion (an explicit stack of at most [`MAX_DEPTH`] levels), and rewrites only the tokens that stand as
//! elements of a data array: `NaN` as `null` (a missing point, as before) and `±Infinity` as a marker string that
//! the tensor reader turns back into ±inf (so `target` can refuse it by name). A token anywhere else is left as
//! it is, and serde_json's error says it is not JSON. The walk is linear in the body and never panics; it only
//! decides where a token stands, serde_json still checks the whole document.

/// How deep a request may nest (objects and arrays); deeper is refused before serde_json sees it.
pub const MAX_DEPTH: usize = 64;

/// What `Infinity` becomes (a JSON string with a NUL, which no number-reading client writes).
pub const POS_INF_MARK: &str = "\u{0}+inf";
/// What `-Infinity` becomes.
pub const NEG_INF_MARK: &str = "\u{0}-inf";
const POS_INF_JSON: &[u8] = br#""\u0000+inf""#;
const NEG_INF_JSON: &[u8] = br#""\u0000-inf""#;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// An object; `key` is what its current key is when that matters.
    Object { key: Key, root: bool, input: bool },
    /// An array; `data` when it is (within) an input's `data`, `inputs` when it is the root's `inputs`.
    Array { data: bool, inputs: bool },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Other,
    Inputs,
    Data,
}

/// The body with every non-finite token of tensor data rewritten (see the module docs); `None` when nothing
/// needed rewriting (the body is read as it is). `Err` when the document nests deeper than [`MAX_DEPTH`].
pub fn rewrite(json: &[u8]) -> Result<Option<Vec<u8>>, String> {
    // Fast path: no token to rewrite and no deep nesting to refuse (serde_json's own limit of 128 applies).
    let has_token = memfind(json, b"NaN") || memfind(json, b"Infinity");
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0; // json[..copied] is in `out` when it is Some
    let mut stack: Vec<Frame> = Vec::new();
    let mut expect_key = false; // in an object, before a key
    let mut i = 0;
    while i < json.len() {
        let b = json[i];
        match b {
            b'"' => {
                // A string: find its end (escapes skip one byte).
                let start = i + 1;
                let mut j = start;
                while j < json.len() && json[j] != b'"' {
                    j += if json[j] == b'\\' { 2 } else { 1 };
                }
                let end = j.min(json.len());
                if expect_key {
                    if let Some(Frame::Object { key, root, input }) = stack.last_mut() {
                        let k = &json[start..end];
                        *key = if *root && k == b"inputs" {
                            Key::Inputs
                        } else if *input && k == b"data" {
                            Key::Data
                        } else {
                            Key::Other
                        };
                    }
                    expect_key = false;
                }
                i = end + 1;
                continue;
            }
            b'{' | b'[' => {
                if stack.len() >= MAX_DEPTH {
                    return Err(format!("request JSON nests deeper than {MAX_DEPTH} levels"));
                }
                let parent = stack.last().copied();
                let frame = if b == b'{' {
                    let input = matches!(parent, Some(Frame::Array { inputs: true, .. }));
                    expect_key = true;
                    Frame::Object { key: Key::Other, root: stack.is_empty(), input }
                } else {
                    let (data, inputs) = match parent {
                        Some(Frame::Object { key: Key::Data, .. }) => (true, false),
                        Some(Frame::Object { key: Key::Inputs, .. }) => (false, true),
                        Some(Frame::Array { data: true, .. }) => (true, false),
                        _ => (false, false),
                    };
                    Frame::Array { data, inputs }
                };
                stack.push(frame);
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => {
                expect_key = matches!(stack.last(), Some(Frame::Object { .. }));
            }
            b'N' | b'I' | b'-' if has_token => {
                let in_data = matches!(stack.last(), Some(Frame::Array { data: true, .. }));
                let rest = &json[i..];
                let token: Option<(usize, &[u8])> = if rest.starts_with(b"NaN") {
                    Some((3, b"null"))
                } else if rest.starts_with(b"Infinity") {
                    Some((8, POS_INF_JSON))
                } else if rest.starts_with(b"-Infinity") {
                    Some((9, NEG_INF_JSON))
                } else {
                    None
                };
                if let (true, Some((len, with))) = (in_data, token) {
                    let o = out.get_or_insert_with(|| Vec::with_capacity(json.len() + 64));
                    o.extend_from_slice(&json[copied..i]);
                    o.extend_from_slice(with);
                    copied = i + len;
                    i += len;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(out.map(|mut o| {
        o.extend_from_slice(&json[copied.min(json.len())..]);
        o
    }))
}

/// Whether `needle` occurs in `hay` (linear for these short needles with distinct first bytes).
fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(s: &str) -> Result<String, String> {
        rewrite(s.as_bytes()).map(|o| o.map_or_else(|| s.to_string(), |v| String::from_utf8(v).unwrap()))
    }

    #[test]
    fn only_data_elements_are_rewritten() {
        let s = r#"{"inputs": [{"name": "target", "data": [[1, NaN], [Infinity, -Infinity]]}]}"#;
        assert_eq!(
            rw(s).unwrap(),
            r#"{"inputs": [{"name": "target", "data": [[1, null], ["\u0000+inf", "\u0000-inf"]]}]}"#
        );
        for s in [
            r#"{"inputs": [], "parameters": {"x": NaN}}"#,
            r#"{"inputs": [{"name": "t", "shape": [NaN], "data": [1]}]}"#,
            r#"{"inputs": [{"name": "NaN", "data": [1]}]}"#,
            r#"{"data": [NaN]}"#,
            r#"{"x": {"inputs": [{"data": [NaN]}]}}"#,
            r#"{"inputs": [{"parameters": {"data": [NaN]}}]}"#,
            r#"{"inputs": [{"data": [{"a": NaN}]}]}"#,
            r#"[NaN]"#,
        ] {
            assert_eq!(rw(s).unwrap(), s, "{s}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Token soup (brackets, keys, strings with escapes, the non-finite tokens): never a panic, and what it
        /// gives back differs from the input only where a token was rewritten.
        #[test]
        fn any_token_soup_is_walked_without_panic(parts in proptest::collection::vec(proptest::prop_oneof![
            proptest::strategy::Just("{"), proptest::strategy::Just("}"), proptest::strategy::Just("["),
            proptest::strategy::Just("]"), proptest::strategy::Just(","), proptest::strategy::Just(":"),
            proptest::strategy::Just("\"inputs\""), proptest::strategy::Just("\"data\""),
            proptest::strategy::Just("\"a\\\"b\""), proptest::strategy::Just("\"\\"),
            proptest::strategy::Just("NaN"), proptest::strategy::Just("Infinity"),
            proptest::strategy::Just("-Infinity"), proptest::strategy::Just("1.5"), proptest::strategy::Just("null"),
        ], 0..200)) {
            let text = parts.concat();
            if let Ok(Some(out)) = rewrite(text.as_bytes()) {
                let back = String::from_utf8(out).unwrap()
                    .replace("null", "NaN")
                    .replace(r#""\u0000+inf""#, "Infinity")
                    .replace(r#""\u0000-inf""#, "-Infinity");
                proptest::prop_assert_eq!(back, text.replace("null", "NaN"));
            }
        }
    }

    #[test]
    fn deep_nesting_is_refused_and_nothing_panics() {
        let deep = "[".repeat(100_000);
        assert!(rw(&deep).unwrap_err().contains("deeper than 64"));
        let ok = format!("{}{}", "[".repeat(60), "]".repeat(60));
        assert!(rw(&ok).is_ok());
        for s in ["", "\"", "\"\\", "{\"inputs\":[{\"data\":[NaN", "]]]}}}NaN", "{\"inputs\" \"data\" [-"] {
            let _ = rw(s);
        }
    }
}
