//! text[] literals as PostgreSQL writes them, read without a database (the capture
//! trigger's arguments, extension/src/capture.rs).

/// The elements of a one-dimensional text[] literal as PostgreSQL writes one (`{a,"b c"}`:
/// an element is quoted when it holds a comma, a quote, a backslash, a brace or a space,
/// and within quotes a backslash escapes the next character). None if it is not one.
pub fn array_literal(text: &str) -> Option<Vec<String>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut items = Vec::new();
    if inner.is_empty() {
        return Some(items);
    }
    let mut chars = inner.chars().peekable();
    loop {
        let mut item = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => item.push(chars.next()?),
                    c => item.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                item.push(c);
                chars.next();
            }
        }
        items.push(item);
        match chars.next() {
            None => return Some(items),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::array_literal;

    #[test]
    fn array_literals_read_as_postgres_writes_them() {
        assert_eq!(array_literal("{id}"), Some(vec!["id".to_string()]));
        assert_eq!(
            array_literal(r#"{stream_id,tag,"a b","x,y","q\"t","b\\s"}"#),
            Some(
                ["stream_id", "tag", "a b", "x,y", "q\"t", "b\\s"]
                    .map(String::from)
                    .to_vec()
            )
        );
        assert_eq!(array_literal("{}"), Some(vec![]));
        for bad in ["", "id", "{id", "{\"id}", "{\"a\"b}"] {
            assert_eq!(array_literal(bad), None, "{bad}");
        }
    }
}
