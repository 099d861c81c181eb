//! Node and tensor names: `name:index`, `^name`, and TensorFlow's unique-name rule.
use crate::Graph;

/// Splits `name` or `name:N` into the node name and output index.
pub fn parse_output_name(s: &str) -> Option<(&str, usize)> {
    if s.is_empty() || s.starts_with('^') {
        return None;
    }
    match s.rsplit_once(':') {
        Some((name, idx)) if !idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit()) => {
            (!name.is_empty()).then_some(())?;
            Some((name, idx.parse().ok()?))
        }
        Some(_) => None,
        None => Some((s, 0)),
    }
}

/// Formats an input reference as TensorFlow writes it: `name` for output 0, else `name:N`.
pub fn format_output(name: &str, index: usize) -> String {
    if index == 0 {
        name.to_string()
    } else {
        format!("{name}:{index}")
    }
}

impl Graph {
    /// A name not yet used in this graph, by TensorFlow's rule: `base`, then `base_1`,
    /// `base_2`, ... (compared case-insensitively, skipping names already taken).
    pub fn unique_name(&mut self, base: &str) -> String {
        let key = base.to_lowercase();
        let mut i = self.names_in_use.get(&key).copied().unwrap_or(0);
        if i == 0 && !self.by_name.contains_key(base) {
            self.names_in_use.insert(key, 1);
            return base.to_string();
        }
        i = i.max(1);
        loop {
            let candidate = format!("{base}_{i}");
            i += 1;
            let ckey = candidate.to_lowercase();
            if !self.names_in_use.contains_key(&ckey) && !self.by_name.contains_key(&candidate) {
                self.names_in_use.insert(key, i);
                self.names_in_use.insert(ckey, 1);
                return candidate;
            }
        }
    }

    /// Marks a name as used (for names that came from elsewhere, e.g. an imported GraphDef).
    pub(crate) fn reserve_name(&mut self, name: &str) {
        self.names_in_use.entry(name.to_lowercase()).or_insert(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names() {
        assert_eq!(parse_output_name("x"), Some(("x", 0)));
        assert_eq!(parse_output_name("a/b:3"), Some(("a/b", 3)));
        assert_eq!(parse_output_name("^x"), None);
        assert_eq!(parse_output_name(":1"), None);
        assert_eq!(parse_output_name("x:"), None);
        assert_eq!(parse_output_name("x:y"), None);
        assert_eq!(format_output("x", 0), "x");
        assert_eq!(format_output("x", 2), "x:2");
    }

    #[test]
    fn unique_names_follow_tensorflow() {
        let mut g = Graph::new();
        assert_eq!(g.unique_name("add"), "add");
        assert_eq!(g.unique_name("add"), "add_1");
        assert_eq!(g.unique_name("add"), "add_2");
        assert_eq!(g.unique_name("add_1"), "add_1_1");
        assert_eq!(g.unique_name("Add"), "Add_3");
        assert_eq!(g.unique_name("mul"), "mul");
    }
}
