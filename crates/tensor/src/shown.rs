//! Values from files as they appear in error messages: one line, and short, so that a hostile
//! header, index or tensor name cannot make a message kilobytes long.

/// `text` escaped (one line) and cut to `max` characters, ending in `…` when cut.
pub fn text(text: &str, max: usize) -> String {
    let escaped: String = text.escape_debug().collect();
    match escaped.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped,
    }
}

/// Dimensions: the first eight, then how many there are.
pub fn dims(dims: &[usize]) -> String {
    match dims.len() {
        0..=8 => format!("{dims:?}"),
        n => format!("{:?}… ({n} dimensions)", &dims[..8]),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_values_are_cut_and_escaped() {
        assert_eq!(super::text("a\nb", 10), "a\\nb");
        assert_eq!(super::text("ééé", 2), "éé…");
        assert_eq!(super::dims(&[1; 10]), "[1, 1, 1, 1, 1, 1, 1, 1]… (10 dimensions)");
        assert_eq!(super::dims(&[2, 3]), "[2, 3]");
    }
}
