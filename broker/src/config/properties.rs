//! The Java `.properties` format, as far as `server.properties` files use it.

use super::ConfigError;
use std::collections::BTreeMap;

/// Parses `key=value` (or `key: value`) lines; `#` and `!` start comments; a trailing
/// backslash continues a line.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        if let Some(stripped) = line.strip_suffix('\\') {
            pending.push_str(stripped);
            continue;
        }
        pending.push_str(line);
        let entry = std::mem::take(&mut pending);
        let idx = entry.find(['=', ':']).ok_or_else(|| ConfigError::Malformed(entry.clone()))?;
        let (k, v) = entry.split_at(idx);
        out.insert(k.trim().to_string(), v[1..].trim().to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments_separators_and_continuations() {
        let p = parse_properties("# c\n a=1\nb : 2\nc=x,\\\n  y\n\n!x\n").unwrap();
        assert_eq!(p["a"], "1");
        assert_eq!(p["b"], "2");
        assert_eq!(p["c"], "x,y");
        assert!(parse_properties("novalue\n").is_err());
    }
}
