//! Where a damaged protobuf file goes wrong, for error messages: a walk over the top-level
//! fields (and, for length-delimited ones that parse as messages, one level inside) that
//! finds the first field whose tag, varint or declared length runs past the bytes present.

/// `(offset, what)` of the first damage found, or `None` when the framing is intact.
pub fn first_damage(bytes: &[u8]) -> Option<(u64, String)> {
    walk(bytes, 0, 2)
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn walk(b: &[u8], base: usize, depth: u32) -> Option<(u64, String)> {
    let mut at = 0;
    while at < b.len() {
        let field_at = at;
        let here = |what: String| Some(((base + field_at) as u64, what));
        let Some(key) = varint(b, &mut at) else { return here("a field key runs past the end".into()) };
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                if varint(b, &mut at).is_none() {
                    return here(format!("field {field}: its varint runs past the end"));
                }
            }
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                if at + n > b.len() {
                    return here(format!("field {field}: {n} fixed bytes, {} present", b.len() - at));
                }
                at += n;
            }
            2 => {
                let Some(len) = varint(b, &mut at) else {
                    return here(format!("field {field}: its length runs past the end"));
                };
                let left = (b.len() - at) as u64;
                if len > left {
                    return here(format!("field {field} declares {len} bytes, {left} present"));
                }
                let inner = &b[at..at + len as usize];
                if depth > 0 {
                    // Only report inside when the content looks like a message that breaks.
                    if let Some(d) = walk(inner, base + at, depth - 1) {
                        if looks_like_message(inner) {
                            return Some(d);
                        }
                    }
                }
                at += len as usize;
            }
            _ => return here(format!("field {field}: wire type {wire} is not valid")),
        }
    }
    None
}

/// A message's first key has a small field number and a valid wire type.
fn looks_like_message(b: &[u8]) -> bool {
    let mut at = 0;
    matches!(varint(b, &mut at), Some(k) if (1..=32).contains(&(k >> 3)) && matches!(k & 7, 0 | 1 | 2 | 5))
}

#[cfg(test)]
mod tests {
    use super::first_damage;

    #[test]
    fn a_cut_length_delimited_field_is_found() {
        // field 1, length 10, only 3 bytes.
        let b = [0x0a, 10, 1, 2, 3];
        let (at, what) = first_damage(&b).unwrap();
        assert_eq!(at, 0);
        assert!(what.contains("declares 10 bytes, 3 present"), "{what}");
        assert_eq!(first_damage(&[0x08, 0x96, 0x01]), None);
        // Inside a nested message: field 1 { field 2: declares 9, 1 present }.
        let b = [0x0a, 3, 0x12, 9, 7];
        assert_eq!(first_damage(&b).unwrap().0, 2);
    }
}
